package apiserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/registry"
)

// UIHandler serves the web UI at /ui/ (Config.UI): the dashboard, mounted on the
// apiserver's own port. It is called only after the request chain has authenticated
// the request and authorized it as a non-resource request (`get` on /ui/*), with
// asUser: a transport that carries the UI's own server-side API calls through this
// server's chain after authentication, as the request's user. The UI therefore needs
// and has no identity of its own: what it reads and writes for a user, RBAC judges as
// that user's.
type UIHandler func(w http.ResponseWriter, r *http.Request, asUser http.RoundTripper)

// uiPrefix is where the UI is served.
const uiPrefix = "/ui/"

// isUIPath reports whether path is the UI's: a non-resource URL, never parsed as a
// resource request and never confused with discovery.
func isUIPath(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, uiPrefix)
}

// serveUI passes an authorized request for /ui/... to the UI, with framing denied: an
// ambient credential (the browser's client certificate) must not be usable by a page
// of another site that draws the UI in a frame (clickjacking).
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, uiPrefix, http.StatusMovedPermanently)
		return
	}
	user, _ := registry.UserFrom(r.Context())
	s.cfg.UI(w, r, userTransport{next: s.authenticated, user: user})
}

// userTransport serves a request in-process through the chain after authentication
// (impersonation, requestInfo, authorization, admission, the REST core) as user. The
// answer is buffered, so it is for the UI's short reads and writes, not for watches or
// upgraded connections (those the browser makes to the apiserver itself).
type userTransport struct {
	next http.Handler
	user registry.User
}

// RoundTrip implements http.RoundTripper.
func (t userTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") || strings.Contains(strings.ToLower(req.Header.Get("Connection")), "upgrade") {
		return nil, errNoUpgrade
	}
	r := req.Clone(registry.WithUser(req.Context(), t.user))
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "in-process"
	r.TLS = nil
	// Credentials of the request are never the in-process request's: the user is.
	r.Header.Del("Authorization")
	rec := &bufferedResponse{header: http.Header{}}
	t.next.ServeHTTP(rec, r)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(rec.code), StatusCode: rec.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

var errNoUpgrade = errors.New("the in-process transport does not carry upgraded connections")

// bufferedResponse is a ResponseWriter that keeps the answer for userTransport.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) Flush() {}

// withBrowserOrigin refuses what a browser sends on behalf of another site's page when
// it could change something: a write (any method but GET, HEAD and OPTIONS) or a
// WebSocket handshake (exec, attach, port-forward, which browsers send without Fetch
// Metadata). A browser presents its client certificate to every page's requests alike,
// so without this another site could act as the certificate's user. Refused: what the
// browser marks cross-site or same-site (Sec-Fetch-Site; same-site is another port or
// subdomain), and what names an Origin other than this server's. One Origin is let
// through on WebSocket handshakes: "http://localhost" exactly, which upstream's e2e
// framework (and golang.org/x/net/websocket's users generally) send from outside any
// browser; a browser sends it only for a page of the victim's own port 80. Clients
// that are not browsers (kubectl, client-go) send neither header and are not affected;
// reads from another origin stay unreadable to it, as the server sends no CORS headers.
func withBrowserOrigin(next http.Handler, fail func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if crossOriginChange(r) {
			fail(w, r, forbiddenCrossOrigin(r))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// nonBrowserWebSocketOrigin is the Origin upstream's e2e framework opens its exec and
// log WebSockets with (test/e2e/framework/websocket), from outside any browser.
const nonBrowserWebSocketOrigin = "http://localhost"

// crossOriginChange reports whether r is a state change or WebSocket handshake a
// browser sent from a page of another origin.
func crossOriginChange(r *http.Request) bool {
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if !upgrade {
			return false
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || upgrade && origin == nonBrowserWebSocketOrigin {
		return false
	}
	// "null" (a sandboxed frame, a data: URL) is no origin of this server's either.
	scheme, host, ok := strings.Cut(origin, "://")
	return !ok || (scheme != "https" && scheme != "http") || !strings.EqualFold(host, r.Host)
}

func forbiddenCrossOrigin(r *http.Request) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: "cross-origin request refused: a browser sent this " + describeMethod(r) +
			" from a page of " + pageOrigin(r) + ", not of this server (" + r.Host + ")"}}
}

// pageOrigin names where the browser says the request comes from.
func pageOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	return "another origin (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
}

func describeMethod(r *http.Request) string {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "WebSocket handshake"
	}
	return r.Method + " request"
}

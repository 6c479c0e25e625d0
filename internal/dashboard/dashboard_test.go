package dashboard

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"mizzen/internal/pki"
)

// fakeAPIServer records what reaches it: the Authorization header, whether a client
// certificate was presented, and the cookies, per path.
type fakeAPIServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, path, auth, cookie, origin string
	clientCert                         bool
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"),
			cookie: r.Header.Get("Cookie"), origin: r.Header.Get("Origin"), clientCert: r.TLS != nil && len(r.TLS.PeerCertificates) > 0})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer good" && r.Header.Get("Authorization") != "Bearer viewer":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
		case r.URL.Path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"kind":"SelfSubjectReview","status":{"userInfo":{"username":"system:serviceaccount:default:`+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`"}}}`)
		case r.Method == http.MethodDelete && r.Header.Get("Authorization") == "Bearer viewer":
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"p\" is forbidden: User \"viewer\" cannot delete resource \"pods\"","reason":"Forbidden","code":403}`)
		default:
			_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
		}
	}))
	f.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// newTestDashboard serves the dashboard in front of the fake apiserver, given a config
// with privileged credentials (an admin client certificate and a token) that must never
// reach the apiserver on a user's behalf.
func newTestDashboard(t *testing.T) (*httptest.Server, *fakeAPIServer) {
	t.Helper()
	api := newFakeAPIServer(t)
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.IssueClient("admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: api.URL, BearerToken: "admin-secret",
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}),
			CertData: admin.CertPEM, KeyData: admin.KeyPEM,
		}}
	h, err := NewHandler(cfg, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dash := httptest.NewTLSServer(h)
	t.Cleanup(dash.Close)
	return dash, api
}

func noRedirects(dash *httptest.Server) *http.Client {
	c := *dash.Client() // a copy: the server's own client follows redirects
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func do(t *testing.T, c *http.Client, method, url string, body io.Reader, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func session(token string) map[string]string {
	return map[string]string{"Cookie": tokenCookie + "=" + token + "; " + csrfCookie + "=c5rf"}
}

func TestWithoutSession(t *testing.T) {
	dash, api := newTestDashboard(t)
	c := noRedirects(dash)

	resp, _ := do(t, c, "GET", dash.URL+"/", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET / without a session: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := do(t, c, "GET", dash.URL+"/login", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Errorf("GET /login: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, c, "GET", dash.URL+"/k8s/api/v1/pods", nil, nil)
	var status struct {
		Kind, Reason string
		Code         int
	}
	if err := json.Unmarshal([]byte(body), &status); err != nil || resp.StatusCode != 401 || status.Kind != "Status" || status.Reason != "Unauthorized" || status.Code != 401 {
		t.Errorf("GET /k8s/api/v1/pods without a session: %d %s", resp.StatusCode, body)
	}
	if got := api.requests(); len(got) != 0 {
		t.Errorf("requests without a session reached the apiserver: %+v", got)
	}
}

func TestSessionTokenIsForwardedAlone(t *testing.T) {
	dash, api := newTestDashboard(t)
	c := noRedirects(dash)
	resp, body := do(t, c, "GET", dash.URL+"/k8s/api/v1/pods?watch=1", nil, session("good"))
	if resp.StatusCode != 200 || !strings.Contains(body, "PodList") {
		t.Fatalf("GET pods with a session: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("a proxied response's Content-Security-Policy is %q, want a sandbox", csp)
	}
	// A token the apiserver does not know gets the apiserver's own 401.
	resp, body = do(t, c, "GET", dash.URL+"/k8s/api/v1/pods", nil, session("stolen"))
	if resp.StatusCode != 401 || !strings.Contains(body, "Unauthorized") {
		t.Errorf("GET pods with an unknown token: %d %s", resp.StatusCode, body)
	}
	got := api.requests()
	if len(got) != 2 {
		t.Fatalf("apiserver saw %d requests, want 2: %+v", len(got), got)
	}
	for i, want := range []string{"Bearer good", "Bearer stolen"} {
		r := got[i]
		if r.path != "/api/v1/pods" || r.auth != want {
			t.Errorf("request %d reached the apiserver as %s with %q, want /api/v1/pods with %q", i, r.path, r.auth, want)
		}
		if r.clientCert {
			t.Errorf("request %d carried the dashboard's client certificate", i)
		}
		if r.cookie != "" {
			t.Errorf("request %d carried the browser's cookies: %q", i, r.cookie)
		}
	}
}

func TestBrowserCredentialsDoNotOverride(t *testing.T) {
	dash, api := newTestDashboard(t)
	h := session("viewer")
	h["Authorization"] = "Bearer good" // a page's script cannot raise its rights
	h["X-Remote-User"] = "admin"
	do(t, noRedirects(dash), "GET", dash.URL+"/k8s/api/v1/pods", nil, h)
	if got := api.requests(); len(got) != 1 || got[0].auth != "Bearer viewer" {
		t.Errorf("apiserver saw %+v, want the session's token only", got)
	}
}

func TestStateChangesNeedCSRFToken(t *testing.T) {
	dash, api := newTestDashboard(t)
	c := noRedirects(dash)
	url := dash.URL + "/k8s/api/v1/namespaces/default/pods/p"
	resp, body := do(t, c, "DELETE", url, nil, session("good"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("DELETE without the CSRF header: %d %s", resp.StatusCode, body)
	}
	h := session("good")
	h[csrfHeader] = "c5rf"
	h["Origin"] = "https://evil.example"
	if resp, _ := do(t, c, "DELETE", url, nil, h); resp.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE from another origin: %d, want 403", resp.StatusCode)
	}
	if n := len(api.requests()); n != 0 {
		t.Fatalf("refused requests reached the apiserver: %d", n)
	}
	h["Origin"] = dash.URL
	if resp, body := do(t, c, "DELETE", url, nil, h); resp.StatusCode != 200 {
		t.Errorf("DELETE with the CSRF header: %d %s", resp.StatusCode, body)
	}
	// RBAC's refusal is the apiserver's, message and all.
	h = session("viewer")
	h[csrfHeader] = "c5rf"
	resp, body = do(t, c, "DELETE", url, nil, h)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `cannot delete resource \"pods\"`) {
		t.Errorf("DELETE as a viewer: %d %s", resp.StatusCode, body)
	}
	// WebSockets (exec) carry no header: their Origin must be the dashboard's.
	ws := session("good")
	ws["Connection"], ws["Upgrade"], ws["Origin"] = "Upgrade", "websocket", "https://evil.example"
	if resp, _ := do(t, c, "GET", dash.URL+"/k8s/api/v1/namespaces/default/pods/p/exec", nil, ws); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site WebSocket: %d, want 403", resp.StatusCode)
	}
}

func TestOnlyTheAPIIsProxied(t *testing.T) {
	dash, api := newTestDashboard(t)
	for _, p := range []string{"/k8s/api/v1/namespaces/default/pods/web/proxy/", "/k8s/api/v1/namespaces/default/services/web:80/proxy/index.html",
		"/k8s/api/v1/nodes/n1/proxy/stats/summary"} {
		if resp, body := do(t, noRedirects(dash), "GET", dash.URL+p, nil, session("good")); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s: %d %s, want 403: what a pod serves must not run on the dashboard's origin", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/k8s/metrics", "/k8s/debug/pprof/", "/k8s/api/../logs/"} {
		if resp, _ := do(t, dash.Client(), "GET", dash.URL+p, nil, session("good")); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("%d requests outside the API reached the apiserver", n)
	}
}

func TestLogin(t *testing.T) {
	dash, _ := newTestDashboard(t)
	c := noRedirects(dash)
	form := func(token string) io.Reader { return strings.NewReader(url.Values{"token": {token}}.Encode()) }
	formHeader := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": dash.URL}

	resp, body := do(t, c, "POST", dash.URL+"/login", form("wrong"), formHeader)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "refused the token") || len(resp.Cookies()) != 0 {
		t.Errorf("login with an unknown token: %d, cookies %v, %s", resp.StatusCode, resp.Cookies(), body)
	}
	resp, _ = do(t, c, "POST", dash.URL+"/login", form("good"), map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("login from another origin: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	resp, _ = do(t, c, "POST", dash.URL+"/login", form("good"), formHeader)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := map[string]*http.Cookie{}
	for _, ck := range resp.Cookies() {
		cookies[ck.Name] = ck
	}
	tok, csrf := cookies[tokenCookie], cookies[csrfCookie]
	if tok == nil || tok.Value != "good" || !tok.HttpOnly || !tok.Secure || tok.SameSite != http.SameSiteStrictMode {
		t.Errorf("token cookie %+v: want the token, HttpOnly, Secure, SameSite=Strict", tok)
	}
	if csrf == nil || len(csrf.Value) != 64 || csrf.HttpOnly || !csrf.Secure || csrf.SameSite != http.SameSiteStrictMode {
		t.Errorf("CSRF cookie %+v: want 32 random bytes readable by the pages, Secure, SameSite=Strict", csrf)
	}
	h := session("good")
	resp, body = do(t, c, "GET", dash.URL+"/", nil, h)
	if resp.StatusCode != 200 || !strings.Contains(body, `src="static/app.js"`) {
		t.Errorf("GET / with a session: %d", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

func TestEmbeddedAssets(t *testing.T) {
	dash, _ := newTestDashboard(t)
	for _, p := range []string{"/static/app.js", "/static/app.css", "/static/vendor/xterm/xterm.js", "/static/vendor/xterm/xterm.css", "/static/vendor/xterm/LICENSE"} {
		resp, body := do(t, noRedirects(dash), "GET", dash.URL+p, nil, nil)
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", p, resp.StatusCode, len(body))
		}
	}
}

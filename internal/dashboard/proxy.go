package dashboard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// proxyPrefix is where the pages reach the apiserver: /k8s/api/v1/pods is the
// apiserver's /api/v1/pods, asked for as the logged-in user.
const proxyPrefix = "/k8s"

// apiPaths are the apiserver paths the proxy passes on; anything else is not the
// dashboard's business.
var apiPaths = []string{"/api", "/apis", "/version", "/readyz", "/livez", "/healthz"}

// apiProxy passes requests to the apiserver with the session's token as their only
// credential. Its transport carries no client certificate or token of its own, so a
// request without a session reaches nothing, and one with a session reaches only what
// that user may.
type apiProxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	client *http.Client
	log    *slog.Logger
}

func newAPIProxy(cfg *rest.Config, log *slog.Logger) (*apiProxy, error) {
	// Only the address and the CA of cfg are used.
	anon := rest.AnonymousClientConfig(cfg)
	target, err := url.Parse(anon.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver address %q: %w", anon.Host, err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	target.Path = strings.TrimSuffix(target.Path, "/")
	tlsCfg, err := rest.TLSConfigFor(anon)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		// WebSocket upgrades (exec) need HTTP/1.1 to the apiserver.
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	transport := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 32}
	p := &apiProxy{target: target, client: &http.Client{Transport: transport}, log: log}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     transport,
		FlushInterval: -1, // watches and followed logs reach the browser as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the browser went away
			}
			log.Info("dashboard proxy", "path", r.URL.Path, "err", err)
			writeStatus(w, http.StatusBadGateway, "ServiceUnavailable", "the apiserver could not be reached: "+err.Error())
		},
	}
	return p, nil
}

// rewrite aims the request at the apiserver with the user's token and nothing else of
// the browser's credentials.
func (p *apiProxy) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme = p.target.Scheme
	out.URL.Host = p.target.Host
	out.URL.Path = p.target.Path + strings.TrimPrefix(pr.In.URL.Path, proxyPrefix)
	out.URL.RawPath = ""
	out.Host = p.target.Host
	// The browser's Origin and Sec-Fetch-* describe the dashboard's origin, which the
	// dashboard has checked itself; the apiserver judges its own (see its /ui/).
	for _, h := range []string{"Cookie", "Authorization", "Origin", "Referer", csrfHeader, "Proxy-Authorization",
		"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
		out.Header.Del(h)
	}
	for name := range out.Header {
		// Headers only an authenticating front proxy may set: never the browser's.
		if strings.HasPrefix(strings.ToLower(name), "x-remote-") {
			out.Header.Del(name)
		}
	}
	out.Header.Set("Authorization", "Bearer "+tokenFrom(pr.In))
}

func (p *apiProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, proxyPrefix)
	if !allowedPath(path) {
		writeStatus(w, http.StatusNotFound, "NotFound", "the dashboard proxies only the apiserver's API")
		return
	}
	if isProxySubresource(path) {
		// What a pod or service serves would run on the dashboard's origin, with the
		// user's session: no.
		writeStatus(w, http.StatusForbidden, "Forbidden", "the dashboard does not pass on the proxy subresources of pods, services and nodes")
		return
	}
	if tokenFrom(r) == "" {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized: log in to the dashboard")
		return
	}
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	switch {
	case upgrade && (r.Header.Get("Origin") == "" || !sameOrigin(r)):
		// A WebSocket carries no CSRF header; its Origin must be the dashboard's.
		writeStatus(w, http.StatusForbidden, "Forbidden", "cross-site WebSocket refused")
		return
	case !safeMethod(r.Method) && (!sameOrigin(r) || !csrfOK(r)):
		writeStatus(w, http.StatusForbidden, "Forbidden", "cross-site request refused: the dashboard's CSRF token is missing or wrong")
		return
	}
	// Whatever comes back is data, never a page of the dashboard's origin.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	p.rp.ServeHTTP(w, r)
}

// isProxySubresource reports whether path names pods/proxy, services/proxy or
// nodes/proxy (or any other resource's proxy).
func isProxySubresource(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "proxy" {
			return true
		}
	}
	return false
}

func allowedPath(path string) bool {
	if strings.Contains(path, "..") {
		return false
	}
	for _, p := range apiPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// writeStatus answers as the apiserver would, with a metav1.Status.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
}

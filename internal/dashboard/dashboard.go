// Package dashboard serves the web UI: pages, scripts and styles embedded in the
// binary, served two ways. On its own port (NewHandler, Run) it is an HTTPS server with
// a small authenticated proxy that carries every API call from the browser to the
// apiserver with the logged-in user's own bearer token. Mounted in the apiserver at
// /ui/ (NewUI) the pages call the apiserver's own REST paths on the same origin, so the
// browser's client certificate (or a token the page holds) authenticates them through
// the apiserver's normal chain. Either way the dashboard holds no identity of its own
// for user data: what a user may see or do is what RBAC lets that user see or do, and a
// refusal is the apiserver's own.
package dashboard

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"k8s.io/client-go/rest"

	"mizzen/internal/pki"
)

//go:embed assets
var assets embed.FS

// Options configure the dashboard.
type Options struct {
	// APIServer names the apiserver and the CA its serving certificate is verified
	// against. Any credentials in it are dropped: requests carry the user's token.
	APIServer *rest.Config
	// Listen is the address to serve HTTPS on, unless Listener is given.
	Listen   string
	Listener net.Listener
	// CertFile and KeyFile are the serving certificate; when empty a self-signed one is
	// made and kept in CertDir.
	CertFile, KeyFile, CertDir string
	// ProxyHealthzPort is where the nodes' service proxies serve /healthz (upstream's
	// 10256); the overview reads it through the apiserver's node proxy. 0: not shown.
	ProxyHealthzPort int
	Log              *slog.Logger
}

// Run serves the dashboard until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	h, err := NewHandler(opts.APIServer, opts.ProxyHealthzPort, opts.Log)
	if err != nil {
		return err
	}
	cert, err := servingCertificate(opts)
	if err != nil {
		return err
	}
	l := opts.Listener
	if l == nil {
		if l, err = net.Listen("tcp", opts.Listen); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          slog.NewLogLogger(opts.Log.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(l, "", "") }()
	opts.Log.Info("dashboard serving", "url", "https://"+l.Addr().String()+"/")
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx) // watches, logs and terminals end with the server
	_ = srv.Close()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servingCertificate is the given certificate, else one issued by a CA of its own kept
// in CertDir (browsers will ask the user to accept it).
func servingCertificate(opts Options) (tls.Certificate, error) {
	if opts.CertFile != "" || opts.KeyFile != "" {
		return tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	}
	if opts.CertDir == "" {
		return tls.Certificate{}, fmt.Errorf("a serving certificate (--tls-cert-file, --tls-private-key-file) or a --cert-dir to keep a self-signed one is required")
	}
	ca, err := pki.LoadOrCreateCA(opts.CertDir, "dashboard-ca", "mizzen-dashboard-ca")
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _, _ := net.SplitHostPort(opts.Listen)
	var ips []net.IP
	names := []string{"localhost"}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if host != "" && ip == nil {
		names = append(names, host)
	}
	ips = append(ips, net.IPv4(127, 0, 0, 1))
	issued, err := ca.IssueServing("mizzen-dashboard", names, ips)
	if err != nil {
		return tls.Certificate{}, err
	}
	return issued.TLS()
}

// NewHandler is the dashboard's HTTP handler: the login page, the embedded assets, and
// the proxy to the apiserver of cfg. proxyHealthzPort is the nodes' service proxies'
// health port the overview asks (0: none).
func NewHandler(cfg *rest.Config, proxyHealthzPort int, log *slog.Logger) (http.Handler, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, fmt.Errorf("the apiserver's address is required")
	}
	p, err := newAPIProxy(cfg, log)
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	d := &dashboard{proxy: p, static: static, log: log, anon: rest.AnonymousClientConfig(cfg),
		settings: settings{ProxyHealthzPort: proxyHealthzPort}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.serveIndex)
	mux.HandleFunc("GET /login", d.serveLoginPage)
	mux.HandleFunc("POST /login", d.serveLogin)
	mux.HandleFunc("POST /logout", d.serveLogout)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.Handle(proxyPrefix+"/", p)
	mux.HandleFunc("GET /settings", d.serveSettings)
	mux.HandleFunc("GET /proxyhealth/{node}", d.serveProxyHealth)
	mux.HandleFunc("GET /journey/pods/{namespace}/{name}", d.servePodJourney)
	mux.HandleFunc("GET /journey/deployments/{namespace}/{name}", d.serveDeploymentJourneys)
	return securityHeaders(mux), nil
}

type dashboard struct {
	// ui is true when the apiserver serves the dashboard at /ui/ (NewUI): the user is
	// the apiserver's request's, and the server-side helpers reach the API in-process
	// through the transport it passes (asUserFrom).
	ui     bool
	proxy  *apiProxy
	static fs.FS
	log    *slog.Logger
	// anon is the apiserver's address and CA without credentials: a session's
	// token is added per request.
	anon     *rest.Config
	settings settings
}

// settings are what the pages need to know of the cluster that the API does not say.
type settings struct {
	ProxyHealthzPort int `json:"proxyHealthzPort"`
}

// serveSettings answers the pages' settings to a logged-in browser.
func (d *dashboard) serveSettings(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.userConfig(r); !ok {
		http.Error(w, "log in first", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(d.settings)
}

// NewUI is the dashboard as the apiserver serves it at /ui/ (the apiserver's
// Config.UI): the pages and the helpers /ui/settings, /ui/proxyhealth/NODE and
// /ui/journey/..., each called by the apiserver after it authenticated and authorized
// the request, with asUser carrying the helpers' API calls through its chain as the
// request's user. The pages' own API calls go to the apiserver's REST paths directly.
func NewUI(proxyHealthzPort int, log *slog.Logger) (func(w http.ResponseWriter, r *http.Request, asUser http.RoundTripper), error) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	d := &dashboard{ui: true, static: static, log: log, settings: settings{ProxyHealthzPort: proxyHealthzPort}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+UIPath+"{$}", func(w http.ResponseWriter, r *http.Request) { d.serveAsset(w, r, "index.html") })
	mux.Handle("GET "+UIPath+"static/", http.StripPrefix(UIPath+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+UIPath+"settings", d.serveSettings)
	mux.HandleFunc("GET "+UIPath+"proxyhealth/{node}", d.serveProxyHealth)
	mux.HandleFunc("GET "+UIPath+"journey/pods/{namespace}/{name}", d.servePodJourney)
	mux.HandleFunc("GET "+UIPath+"journey/deployments/{namespace}/{name}", d.serveDeploymentJourneys)
	h := securityHeaders(mux)
	return func(w http.ResponseWriter, r *http.Request, asUser http.RoundTripper) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), asUserKey{}, asUser)))
	}, nil
}

// UIPath is where the apiserver serves the dashboard (NewUI).
const UIPath = "/ui/"

type asUserKey struct{}

// userConfig is how the helpers reach the apiserver as the request's user: in the
// apiserver (NewUI), through the transport it passed; on the dashboard's own port, at
// the apiserver's address with the session's token as the only credential. ok is
// false without a session.
func (d *dashboard) userConfig(r *http.Request) (cfg *rest.Config, ok bool) {
	if d.ui {
		rt, _ := r.Context().Value(asUserKey{}).(http.RoundTripper)
		if rt == nil {
			return nil, false
		}
		// The host names nothing: the transport serves the request in-process.
		return &rest.Config{Host: "https://apiserver.in-process", Transport: rt}, true
	}
	token := tokenFrom(r)
	if token == "" {
		return nil, false
	}
	cfg = rest.CopyConfig(d.anon)
	cfg.BearerToken = token
	return cfg, true
}

// securityHeaders keep the pages out of other sites' frames and scripts out of the
// pages but their own.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin") // "no-referrer" would make the browser send Origin: null on POSTs
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self' wss: ws:; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		hd.Set("Strict-Transport-Security", "max-age=31536000")
		h.ServeHTTP(w, r)
	})
}

// serveIndex serves the application to a logged-in browser and sends others to the
// login page.
func (d *dashboard) serveIndex(w http.ResponseWriter, r *http.Request) {
	if tokenFrom(r) == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	d.serveAsset(w, r, "index.html")
}

func (d *dashboard) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	w.Header().Set("Cache-Control", "no-store")
	http.ServeFileFS(w, r, d.static, name)
}

// sameOrigin reports whether a state-changing request comes from the dashboard's own
// pages: browsers send Origin with every POST and WebSocket handshake, and another
// site's Origin is refused even though SameSite=Strict already keeps the cookie away.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		// Not a browser's cross-site request (browsers always send it on these);
		// the CSRF header check still applies.
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

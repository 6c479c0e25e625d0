package ingress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is the HTTP handler: it routes each request by the current configuration and
// forwards it to one ready endpoint of the chosen backend.
type proxy struct {
	config  *atomic.Pointer[config]
	reverse *httputil.ReverseProxy
	log     *slog.Logger
}

type endpointKey struct{}

func newProxy(cfg *atomic.Pointer[config], log *slog.Logger) *proxy {
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       60 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	p := &proxy{config: cfg, log: log}
	p.reverse = &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: &bufferPool{},
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = r.In.Context().Value(endpointKey{}).(string)
			// The backend sees the Host the client asked for, as behind ingress-nginx.
			r.Out.Host = r.In.Host
			// Forwarded headers name this hop's client only, as ingress-nginx's default
			// (use-forwarded-headers: false) does: a client cannot pose as another.
			r.SetXForwarded()
			if ip, _, err := net.SplitHostPort(r.In.RemoteAddr); err == nil {
				r.Out.Header.Set("X-Real-IP", ip)
			}
			if _, port, err := net.SplitHostPort(localAddr(r.In)); err == nil {
				r.Out.Header.Set("X-Forwarded-Port", port)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			p.log.Debug("backend failed", "endpoint", r.Context().Value(endpointKey{}), "host", r.Host, "path", r.URL.Path, "err", err)
			http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
		},
	}
	return p
}

// bufferPool reuses the 32 KiB buffers bodies are copied through, which ReverseProxy
// would otherwise allocate per request.
type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.pool.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32*1024)
}

func (b *bufferPool) Put(buf []byte) { b.pool.Put(&buf) }

func localAddr(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return ""
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := p.config.Load()
	b, ok := cfg.routes.Match(r.Host, r.URL.Path)
	if !ok {
		http.Error(w, "404 Not Found", http.StatusNotFound)
		return
	}
	addr, ok := cfg.upstreams[keyOf(b)].pick()
	if !ok {
		http.Error(w, "503 Service Temporarily Unavailable", http.StatusServiceUnavailable)
		return
	}
	p.reverse.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), endpointKey{}, addr)))
}

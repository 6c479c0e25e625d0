package controllermanager

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/cert"

	"mizzen/internal/controllermanager/metrics"
	"mizzen/internal/httpserve"
)

// ServingOptions are --bind-address and --secure-port: where /healthz and /metrics are
// served over HTTPS with a self-signed certificate, as upstream on :10257.
type ServingOptions struct {
	BindAddress string
	// Port 0 picks a free port (tests); Listening reports the address taken.
	Port      int
	Listening func(addr net.Addr)
	// Profiling serves /debug/pprof/ too (--profiling). Nothing here is authenticated,
	// unlike upstream, so the command leaves it off by default.
	Profiling bool
}

// leaderHealthTimeout is how long past its lease's expiry a leader that has not
// renewed still counts as healthy, as upstream.
const leaderHealthTimeout = 20 * time.Second

// serve answers /healthz and /metrics until the returned stop is called, which
// closes the port before it returns: the server bundle runs the controller-manager
// again after it loses its Lease, and that run listens on the same port. healthz fails
// only when this replica leads and has not renewed its lease in time (leader may be nil).
func serve(ctx context.Context, opts ServingOptions, m *metrics.Metrics, leader *leaderelection.HealthzAdaptor) (stop func(), err error) {
	host := opts.BindAddress
	if host == "" {
		host = "0.0.0.0"
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(selfSignedHost(host), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	if opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if leader != nil {
			if err := leader.Check(r); err != nil {
				http.Error(w, "[-]leaderElection failed: "+err.Error()+"\nhealthz check failed", http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	if opts.Listening != nil {
		opts.Listening(ln.Addr())
	}
	slog.InfoContext(ctx, "serving /healthz and /metrics", "address", ln.Addr().String())
	return httpserve.Serve(srv, ln, func(err error) {
		slog.ErrorContext(ctx, "secure serving stopped", "err", err)
	}), nil
}

// selfSignedHost names the certificate after the bind address, or localhost when
// bound to every interface.
func selfSignedHost(bind string) string {
	if ip := net.ParseIP(bind); ip == nil || ip.IsUnspecified() {
		return "localhost"
	}
	return bind
}

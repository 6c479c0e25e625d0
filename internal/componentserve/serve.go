// Package componentserve serves a component's own endpoints (/healthz, /livez,
// /readyz, /metrics and, when asked, /debug/pprof) over HTTPS with a self-signed
// certificate, behind authentication and authorization delegated to the apiserver, as
// upstream's kube-scheduler (:10259) and kube-controller-manager (:10257) serve them:
// the health paths are open to anyone, the rest needs a caller the apiserver
// authorizes for the path (e.g. get on /metrics).
package componentserve

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/cert"

	"mizzen/internal/delegatedauth"
	"mizzen/internal/httpserve"
)

// Options are where and what a component serves.
type Options struct {
	// BindAddress and Port are --bind-address and --secure-port. Port 0 picks a free
	// port (tests); Listening reports the address taken.
	BindAddress string
	Port        int
	Listening   func(addr net.Addr)
	// Profiling serves /debug/pprof/ too (--profiling).
	Profiling bool
}

// Check is a named health check, failing with an error (e.g. leaderElection).
type Check struct {
	Name  string
	Check func(r *http.Request) error
}

// LeaderHealthTimeout is how long past its lease's expiry a leader that has not
// renewed still counts as healthy, as upstream.
const LeaderHealthTimeout = 20 * time.Second

// LeaderElectionCheck is upstream's "leaderElection" check of a replica whose elector
// has leader as its WatchDog: it fails only when the replica leads and has not renewed
// its lease within LeaderHealthTimeout past its expiry.
func LeaderElectionCheck(leader *leaderelection.HealthzAdaptor) Check {
	return Check{Name: "leaderElection", Check: leader.Check}
}

// Endpoints are what a component serves.
type Endpoints struct {
	// Client asks the apiserver who callers are and what they may do.
	Client kubernetes.Interface
	// Metrics serves /metrics.
	Metrics http.Handler
	// Checks run, after ping, on /healthz, /livez and /readyz.
	Checks []Check
	Log    *slog.Logger
}

// Serve answers until the returned stop is called, which closes the port before it
// returns: the server bundle runs the scheduler and the controller-manager again after
// they lose their Lease, and that run listens on the same port. The client CAs are
// followed in the apiserver's ConfigMap until ctx ends; without it (not yet published,
// or not readable) client certificates are not accepted, as upstream tolerates.
func Serve(ctx context.Context, opts Options, ep Endpoints) (stop func(), err error) {
	log := ep.Log
	if log == nil {
		log = slog.Default()
	}
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
	auth := delegatedauth.New(ep.Client, log)
	watchCtx, stopWatch := context.WithCancel(ctx)
	if err := auth.WatchCertAuthenticator(watchCtx, ep.Client, delegatedauth.CertSources{TolerateLookupFailure: true}); err != nil {
		stopWatch()
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		stopWatch()
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	mux := http.NewServeMux()
	if ep.Metrics != nil {
		mux.Handle("/metrics", ep.Metrics)
	}
	if opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	checks := append([]Check{{Name: "ping", Check: func(*http.Request) error { return nil }}}, ep.Checks...)
	for _, name := range []string{"healthz", "livez", "readyz"} {
		installHealth(mux, name, checks)
	}
	srv := &http.Server{
		Handler: auth.Filter(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			// Asked for, not required, and verified per request against the CAs the
			// apiserver publishes, which may change while serving.
			ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if opts.Listening != nil {
		opts.Listening(ln.Addr())
	}
	log.InfoContext(ctx, "serving securely", "address", ln.Addr().String())
	stopServing := httpserve.Serve(srv, ln, func(err error) {
		log.ErrorContext(ctx, "secure serving stopped", "err", err)
	})
	return func() { stopWatch(); stopServing() }, nil
}

// installHealth serves /<name> with every check, and /<name>/<check> with one, as
// upstream's healthz: "ok" when all pass, otherwise 500 listing each check (the
// failure's reason withheld), and the list with ?verbose.
func installHealth(mux *http.ServeMux, name string, checks []Check) {
	mux.Handle("/"+name, healthHandler(name, checks))
	for _, c := range checks {
		mux.Handle("/"+name+"/"+c.Name, healthHandler(name, []Check{c}))
	}
}

func healthHandler(name string, checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.Check(r); err != nil {
				failed = true
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if failed {
			http.Error(w, out.String()+name+" check failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			_, _ = w.Write([]byte("ok"))
			return
		}
		_, _ = w.Write([]byte(out.String() + name + " check passed\n"))
	})
}

// selfSignedHost names the certificate after the bind address, or localhost when
// bound to every interface.
func selfSignedHost(bind string) string {
	if ip := net.ParseIP(bind); ip == nil || ip.IsUnspecified() {
		return "localhost"
	}
	return bind
}

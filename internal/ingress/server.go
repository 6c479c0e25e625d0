// Package ingress is mizzen's Ingress controller: a reverse proxy serving the
// networking.k8s.io/v1 Ingresses of its IngressClass (controller mizzen.io/ingress)
// over HTTP and HTTPS, sending each request straight to a ready endpoint of the chosen
// Service, and writing the address it listens on into the Ingresses' status.
package ingress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Options configure the controller.
type Options struct {
	// HTTPAddr and HTTPSAddr are the listen addresses ("0.0.0.0:80"); "" serves none.
	HTTPAddr, HTTPSAddr string
	// ClassName is the IngressClass served (DefaultClassName if empty).
	ClassName string
	// StatusAddress is written to status.loadBalancer.ingress: an IP, or a hostname.
	StatusAddress string
	// ShutdownTimeout bounds the wait for requests in flight at the end (default 10 s).
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// Server is a running controller.
type Server struct {
	httpLn, httpsLn net.Listener
	done            chan struct{}
	err             error
}

// HTTPAddr and HTTPSAddr are the bound addresses (nil when not serving).
func (s *Server) HTTPAddr() net.Addr  { return addrOf(s.httpLn) }
func (s *Server) HTTPSAddr() net.Addr { return addrOf(s.httpsLn) }

func addrOf(l net.Listener) net.Addr {
	if l == nil {
		return nil
	}
	return l.Addr()
}

// Wait blocks until the server has stopped and returns why.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// Run serves until ctx ends, as `mizzen ingress` does.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	client, err := NewClient(cfg)
	if err != nil {
		return err
	}
	s, err := Start(ctx, client, opts)
	if err != nil {
		return err
	}
	return s.Wait()
}

// NewClient is the controller's client of cfg: protobuf, under its own user agent.
func NewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "mizzen-ingress-controller"
	return kubernetes.NewForConfig(cfg)
}

// Start binds the listeners, syncs the informers and serves until ctx ends; a request
// before the first configuration is built answers 404.
func Start(ctx context.Context, client kubernetes.Interface, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.ClassName == "" {
		opts.ClassName = DefaultClassName
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.HTTPAddr == "" && opts.HTTPSAddr == "" {
		return nil, errors.New("neither an HTTP nor an HTTPS address to serve")
	}
	status := networkingv1.IngressLoadBalancerIngress{}
	if ip := net.ParseIP(opts.StatusAddress); ip != nil {
		status.IP = ip.String()
	} else {
		status.Hostname = opts.StatusAddress
	}
	fallback, err := selfSignedCertificate()
	if err != nil {
		return nil, err
	}
	c, factory, err := newController(client, opts.ClassName, status, fallback, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{done: make(chan struct{})}
	closeAll := func() {
		cancel()
		for _, l := range []net.Listener{s.httpLn, s.httpsLn} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	if opts.HTTPAddr != "" {
		if s.httpLn, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
			cancel()
			return nil, err
		}
	}
	if opts.HTTPSAddr != "" {
		if s.httpsLn, err = net.Listen("tcp", opts.HTTPSAddr); err != nil {
			closeAll()
			return nil, err
		}
	}
	handler := newProxy(&c.current, log)
	newServer := func() *http.Server {
		return &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 75 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	}
	var servers []*http.Server
	serveErrs := make(chan error, 2)
	if s.httpLn != nil {
		srv := newServer()
		servers = append(servers, srv)
		go func() { serveErrs <- srv.Serve(s.httpLn) }()
	}
	if s.httpsLn != nil {
		srv := newServer()
		// ServeTLS adds h2 to NextProtos: HTTP/2 is offered over TLS, HTTP/1.1 beside it.
		srv.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				return c.current.Load().certificate(hello.ServerName), nil
			},
		}
		servers = append(servers, srv)
		go func() { serveErrs <- srv.ServeTLS(s.httpsLn, "", "") }()
	}
	factory.Start(ctx.Done())
	go func() {
		defer close(s.done)
		loopDone := make(chan struct{})
		go func() {
			defer close(loopDone)
			if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
				return
			}
			c.trigger()
			c.run(ctx)
		}()
		select {
		case <-ctx.Done():
		case err := <-serveErrs:
			s.err = fmt.Errorf("serving: %w", err)
		}
		// In-flight requests finish on the configuration they started with.
		shutCtx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutCtx)
		}
		cancel()
		factory.Shutdown()
		<-loopDone
	}()
	log.Info("serving ingresses", "class", opts.ClassName, "http", s.HTTPAddr(), "https", s.HTTPSAddr(), "status", opts.StatusAddress)
	return s, nil
}

// selfSignedCertificate is the certificate of hosts without one of their own, as
// ingress-nginx's "Kubernetes Ingress Controller Fake Certificate".
func selfSignedCertificate() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"mizzen"}, CommonName: "Mizzen Ingress Controller Fake Certificate"},
		DNSNames:              []string{"ingress.local"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

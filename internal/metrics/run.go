package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/delegatedauth"
	"mizzen/internal/pki"
)

// DefaultResolution is how often kubelets are scraped, as upstream's --metric-resolution.
const DefaultResolution = 15 * time.Second

// Options configure a metrics server.
type Options struct {
	// Kubeconfig is the path of the credentials to the apiserver, unless Config is set.
	Kubeconfig string
	Config     *rest.Config
	// BindAddress and SecurePort are where HTTPS is served (4443 by default), unless
	// Listener is set.
	BindAddress string
	SecurePort  int
	Listener    net.Listener
	// CertFile and KeyFile are the serving certificate; without them a self-signed one
	// is made and kept in CertDir.
	CertFile, KeyFile, CertDir string
	// Resolution is the scrape interval; DefaultResolution when zero.
	Resolution time.Duration
	// KubeletCAFile verifies kubelets' serving certificates; without it the
	// apiserver's CA from the credentials does, unless KubeletInsecureTLS.
	KubeletCAFile      string
	KubeletInsecureTLS bool
	// KubeletClientCertFile and KubeletClientKeyFile are presented to kubelets; the
	// credentials' client certificate by default. Its user must be allowed to read
	// stats (nodeserver.MetricsServerUser).
	KubeletClientCertFile, KubeletClientKeyFile string
	// ClientCAFile and RequestHeader* override what the apiserver publishes in
	// kube-system/extension-apiserver-authentication.
	ClientCAFile              string
	RequestHeaderClientCAFile string
	RequestHeaderAllowedNames []string
	Log                       *slog.Logger
}

// Run serves the metrics API until ctx ends.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	if opts.Resolution <= 0 {
		opts.Resolution = DefaultResolution
	}
	cfg := opts.Config
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(opts.Kubeconfig); err != nil {
			return err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "metrics-server/mizzen"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	auth, trustedPEM, err := delegatedauth.LoadCertAuthenticator(ctx, client, delegatedauth.CertSources{
		ClientCAFile: opts.ClientCAFile, RequestHeaderClientCAFile: opts.RequestHeaderClientCAFile, RequestHeaderAllowedNames: opts.RequestHeaderAllowedNames,
	})
	if err != nil {
		return err
	}
	kubeletTLS, err := kubeletTLSConfig(cfg, opts)
	if err != nil {
		return err
	}
	serving, err := servingCertificate(opts)
	if err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	nodes, pods := factory.Core().V1().Nodes(), factory.Core().V1().Pods()
	nodeInformer, podInformer := nodes.Informer(), pods.Informer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced, podInformer.HasSynced) {
		return ctx.Err()
	}

	store := NewStore()
	scraper := &Scraper{Nodes: nodes.Lister(), Source: NewKubeletClient(kubeletTLS, opts.Resolution), Store: store, Resolution: opts.Resolution, Log: log}
	go scraper.Run(ctx)

	handler, err := NewAPIHandler(store, nodes.Lister(), pods.Lister(), auth, log)
	if err != nil {
		return err
	}
	listener := opts.Listener
	if listener == nil {
		port := opts.SecurePort
		if port == 0 {
			port = 4443
		}
		if listener, err = net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(port))); err != nil {
			return err
		}
	}
	clientCAs, err := delegatedauth.NewPool(trustedPEM)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler: handler,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			// Verified per request by the authenticator, which tells the front proxy
			// from other clients.
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  clientCAs,
			MinVersion: tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdownCtx)
	}()
	log.Info("metrics server listening", "address", listener.Addr().String(), "resolution", opts.Resolution)
	if err := hs.ServeTLS(listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// kubeletTLSConfig is how kubelets are reached: the credentials' (or the given)
// client certificate, and their serving certificates verified against the given CA,
// else the apiserver's.
func kubeletTLSConfig(cfg *rest.Config, opts Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case opts.KubeletClientCertFile != "" || opts.KubeletClientKeyFile != "":
		pair, err := tls.LoadX509KeyPair(opts.KubeletClientCertFile, opts.KubeletClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	default:
		restTLS, err := rest.TLSConfigFor(cfg)
		if err != nil {
			return nil, err
		}
		if restTLS == nil || (len(restTLS.Certificates) == 0 && restTLS.GetClientCertificate == nil) {
			return nil, errors.New("the credentials hold no client certificate to present to kubelets; give --kubelet-client-certificate")
		}
		tc.Certificates, tc.GetClientCertificate = restTLS.Certificates, restTLS.GetClientCertificate
		if opts.KubeletCAFile == "" && !opts.KubeletInsecureTLS {
			tc.RootCAs = restTLS.RootCAs
		}
	}
	switch {
	case opts.KubeletInsecureTLS:
		tc.InsecureSkipVerify = true //nolint:gosec // asked for: kubelets with self-signed certificates
	case opts.KubeletCAFile != "":
		data, err := os.ReadFile(opts.KubeletCAFile)
		if err != nil {
			return nil, err
		}
		if tc.RootCAs, err = delegatedauth.NewPool(data); err != nil {
			return nil, fmt.Errorf("--kubelet-certificate-authority: %w", err)
		}
	case tc.RootCAs == nil:
		return nil, errors.New("no CA to verify kubelets with: give --kubelet-certificate-authority or --kubelet-insecure-tls")
	}
	return tc, nil
}

// servingCertificate is the given certificate, else a self-signed one kept in CertDir
// (as upstream's metrics server makes one; the APIService then skips verifying it).
func servingCertificate(opts Options) (tls.Certificate, error) {
	if opts.CertFile != "" || opts.KeyFile != "" {
		return tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	}
	if opts.CertDir == "" {
		return tls.Certificate{}, errors.New("give --tls-cert-file and --tls-private-key-file, or --cert-dir for a self-signed certificate")
	}
	ca, err := pki.LoadOrCreateCA(opts.CertDir, "metrics-server-ca", "metrics-server-ca")
	if err != nil {
		return tls.Certificate{}, err
	}
	issued, err := ca.IssueServing(ServiceName, []string{ServiceName, ServiceName + "." + ServiceNamespace, ServiceName + "." + ServiceNamespace + ".svc", "localhost"}, nil)
	if err != nil {
		return tls.Certificate{}, err
	}
	return issued.TLS()
}

// LoadConfig reads a kubeconfig file (the in-cluster or default rules when empty).
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return cfg, nil
}

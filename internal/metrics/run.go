package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

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
	auth, trustedPEM, err := loadAuthenticator(ctx, client, opts)
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
	clientCAs, err := newPool(trustedPEM)
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

// authenticationConfigMap is where the apiserver publishes whom aggregated servers
// trust.
const (
	authenticationNamespace = "kube-system"
	authenticationConfigMap = "extension-apiserver-authentication"
)

// loadAuthenticator builds the authenticator from the flags, completed from the
// apiserver's published ConfigMap as upstream's aggregated servers do. It also returns
// every CA it trusts, for the TLS handshake to ask for a certificate of one of them.
func loadAuthenticator(ctx context.Context, client kubernetes.Interface, opts Options) (*Authenticator, []byte, error) {
	data := map[string]string{}
	cm, err := client.CoreV1().ConfigMaps(authenticationNamespace).Get(ctx, authenticationConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		data = cm.Data
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		if opts.RequestHeaderClientCAFile == "" {
			return nil, nil, fmt.Errorf("%s/%s: %w (give --requestheader-client-ca-file instead)", authenticationNamespace, authenticationConfigMap, err)
		}
	default:
		return nil, nil, err
	}
	read := func(file, key string) ([]byte, error) {
		if file != "" {
			return os.ReadFile(file)
		}
		return []byte(data[key]), nil
	}
	jsonList := func(key string, def []string) []string {
		var out []string
		if err := json.Unmarshal([]byte(data[key]), &out); err != nil || len(out) == 0 {
			return def
		}
		return out
	}
	a := &Authenticator{}
	clientCA, err := read(opts.ClientCAFile, "client-ca-file")
	if err != nil {
		return nil, nil, err
	}
	if a.ClientCAs, err = newPool(clientCA); err != nil {
		return nil, nil, fmt.Errorf("client CA: %w", err)
	}
	frontCA, err := read(opts.RequestHeaderClientCAFile, "requestheader-client-ca-file")
	if err != nil {
		return nil, nil, err
	}
	if len(frontCA) > 0 {
		rh := &RequestHeaderConfig{
			AllowedNames:    jsonList("requestheader-allowed-names", nil),
			UsernameHeaders: jsonList("requestheader-username-headers", []string{"X-Remote-User"}),
			GroupHeaders:    jsonList("requestheader-group-headers", []string{"X-Remote-Group"}),
			ExtraPrefixes:   jsonList("requestheader-extra-headers-prefix", []string{"X-Remote-Extra-"}),
		}
		if opts.RequestHeaderAllowedNames != nil {
			rh.AllowedNames = opts.RequestHeaderAllowedNames
		}
		if rh.CAs, err = newPool(frontCA); err != nil {
			return nil, nil, fmt.Errorf("request header CA: %w", err)
		}
		a.RequestHeader = rh
	}
	return a, append(append([]byte{}, clientCA...), frontCA...), nil
}

// newPool is a pool of the PEM certificates; none is an empty pool, never the system's.
func newPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if len(pemData) > 0 && !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no PEM certificate")
	}
	return pool, nil
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
		if tc.RootCAs, err = newPool(data); err != nil {
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

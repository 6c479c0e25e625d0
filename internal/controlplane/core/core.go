// Package core assembles the core of every server: etcd (embedded, or an external cluster),
// the apiserver over HTTPS with the cluster's certificates, and the objects every
// cluster starts with. `mizzen server` and `mizzen apiserver` are thin flags over it;
// the bundle adds the other components through their own Run functions.
package core

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/apiserver"
	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/plugins"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/authz/node"
	rbacauthz "mizzen/internal/apiserver/authz/rbac"
	"mizzen/internal/apiserver/authz/rbac/bootstrappolicy"
	"mizzen/internal/apiserver/satoken"
	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/gcpace"
	"mizzen/internal/hostaddr"
	"mizzen/internal/idlemem"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/pki"
	"mizzen/internal/registry"
	"mizzen/internal/registry/catalog"
	"mizzen/internal/registry/flowcontrol"
	"mizzen/internal/registry/scheduling"
	"mizzen/internal/storage"
)

// Options configure the control plane.
type Options struct {
	DataDir     string
	BindAddress string
	SecurePort  int
	// AdvertiseAddress is the IP the kubernetes Service's endpoints and discovery give
	// clients: the bind address, or the machine's primary address when bound to every
	// interface.
	AdvertiseAddress string
	// EtcdServers, when set, is an external cluster (comma-separated client URLs);
	// otherwise etcd runs embedded with its data under DataDir/etcd.
	EtcdServers string
	// ServiceCIDR is where ClusterIPs come from.
	ServiceCIDR string
	// Resources served; nil means every built-in resource.
	Resources []*registry.Resource
	// OpenAPI serves /openapi/*, when set.
	OpenAPI func(resources []*registry.Resource) (http.Handler, error)
	Log     *slog.Logger
	// ServiceAccountSigningKeyFile is the private key (PEM, RSA or ECDSA) that signs
	// and verifies service account tokens; DataDir/tls/sa.key, a 2048-bit RSA key
	// created when missing, by default. Apiservers sharing one etcd must share it.
	ServiceAccountSigningKeyFile string
	// ServiceAccountKeyFiles hold more keys that verify tokens (PEM public or private
	// keys, or certificates), as upstream's --service-account-key-file: the keys of
	// tokens still in use after the signing key changed.
	ServiceAccountKeyFiles []string
	// ServiceAccountIssuers are upstream's repeated --service-account-issuer: the first
	// is the iss claim of the tokens the server issues and of its OpenID discovery
	// document; tokens of any of them are accepted, and all of them are the API
	// audiences. [DefaultServiceAccountIssuer] when empty; bad values (empty, repeated,
	// or with a ':' but not a URL) fail Start.
	ServiceAccountIssuers []string
	// EnableAdmissionPlugins and DisableAdmissionPlugins turn admission plugins on and
	// off beyond upstream's defaults, by upstream's names.
	EnableAdmissionPlugins  []string
	DisableAdmissionPlugins []string
	// KubeletCertificateAuthority is a PEM bundle file that kubelets' serving
	// certificates are verified against; without it they are not verified, as upstream's
	// apiserver does without --kubelet-certificate-authority.
	KubeletCertificateAuthority string
	// AuthorizationMode is Node,RBAC (the default when empty), RBAC or AlwaysAllow.
	AuthorizationMode string
	// DisableAnonymousAuth is --anonymous-auth=false: a request without credentials
	// is refused (401) except for health and version. AlwaysAllow implies it, as
	// upstream resets --anonymous-auth with that authorizer.
	DisableAnonymousAuth bool
	// Profiling serves /debug/pprof/ to authorized clients (--profiling).
	Profiling bool
	// DisablePriorityAndFairness is --enable-priority-and-fairness=false; the two
	// inflight limits share the priority levels' seats (0: upstream's 400 and 200).
	DisablePriorityAndFairness                       bool
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// FlightRecorder, when set, serves the last seconds of the process's execution
	// trace at flightrecorder.Path to the clients Profiling serves
	// (--flight-recorder-window).
	FlightRecorder http.Handler
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the mutual TLS of an external etcd
	// cluster: the CA its members' certificates come from, and this apiserver's client
	// certificate.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// ClusterInit makes the embedded etcd member the first of a cluster of servers:
	// peers and other servers reach it on the advertise address with mutual TLS.
	ClusterInit bool
	// Join, when set, joins this server to the cluster of servers of Join.Server.
	Join *JoinOptions
	// EtcdClientPort and EtcdPeerPort are the embedded member's ports on the advertise
	// address in a cluster of servers (2379 and 2380 when zero).
	EtcdClientPort, EtcdPeerPort int
	// UI serves the web UI at the apiserver's /ui/ (the dashboard); nil serves none.
	UI apiserver.UIHandler
	// ManageMemory hands the heap's freed memory back to the OS when the process
	// goes quiet after a burst, and the executable's pages start-up faulted in once
	// it is first quiet (package idlemem), and gives the collector room while the
	// process is busy (package gcpace). All are the process's, so only a command that
	// owns its process sets it, not tests running several control planes in one.
	ManageMemory bool
}

// DefaultServiceCIDR is where ClusterIPs come from unless configured.
const DefaultServiceCIDR = "10.96.0.0/12"

// DefaultServiceAccountIssuer is the issuer of service account tokens unless configured.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// ControlPlane is a running etcd + apiserver.
type ControlPlane struct {
	// AdminKubeconfig is the path of the cluster-admin kubeconfig.
	AdminKubeconfig string
	// AdminConfig is a rest config with cluster-admin credentials.
	AdminConfig *rest.Config
	// URL is where the apiserver listens.
	URL string
	// DataDir holds the cluster's state; ca signs component credentials.
	DataDir string
	ca      *pki.CA
	Done    chan struct{}
	// Err holds why it stopped, once Done is closed.
	Err error
}

// Start brings up etcd and the apiserver and returns once /readyz would answer ok;
// they stop when ctx ends.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	if opts.BindAddress == "" {
		opts.BindAddress = "0.0.0.0"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	_, serviceCIDR, err := net.ParseCIDR(opts.ServiceCIDR)
	if err != nil || serviceCIDR.IP.To4() == nil {
		return nil, fmt.Errorf("--service-cluster-ip-range %q: an IPv4 CIDR is required", opts.ServiceCIDR)
	}
	// Checked before anything starts: the signer is made while etcd starts.
	if err := satoken.ValidateIssuers(opts.ServiceAccountIssuers); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, err
	}
	dir := datadir.Dir(opts.DataDir)
	tlsDir := dir.TLS()

	authorizer, storageValidators, err := authorization(opts.AuthorizationMode)
	if err != nil {
		return nil, err
	}
	admissionPlugins, err := plugins.Enabled(opts.EnableAdmissionPlugins, opts.DisableAdmissionPlugins)
	if err != nil {
		return nil, err
	}
	if missing := plugins.Unimplemented(admissionPlugins); len(missing) > 0 {
		log.Debug("admission plugins on by default that mizzen does not implement", "plugins", missing)
	}
	if opts.ServiceAccountSigningKeyFile == "" {
		switch len(opts.ServiceAccountKeyFiles) {
		case 0:
			opts.ServiceAccountSigningKeyFile = dir.ServiceAccountKey()
		case 1:
			// One key file alone is the signing key, as mizzen's --service-account-key-file
			// was before --service-account-signing-key-file.
			opts.ServiceAccountSigningKeyFile, opts.ServiceAccountKeyFiles = opts.ServiceAccountKeyFiles[0], nil
		default:
			return nil, errors.New("several service account key files need --service-account-signing-key-file to say which key signs")
		}
	}
	if len(opts.ServiceAccountIssuers) == 0 {
		opts.ServiceAccountIssuers = []string{DefaultServiceAccountIssuer}
	}
	// Making a new RSA key can take a second on a busy machine: it overlaps etcd's start,
	// except on a server about to join a cluster, which receives the cluster's key.
	type signerResult struct {
		signer *satoken.Signer
		err    error
	}
	saSigner := make(chan signerResult, 1)
	loadSigner := func() {
		key, err := satoken.LoadOrCreateKey(opts.ServiceAccountSigningKeyFile)
		if err != nil {
			saSigner <- signerResult{err: fmt.Errorf("service account signing key: %w", err)}
			return
		}
		var verifying []crypto.PublicKey
		for _, path := range opts.ServiceAccountKeyFiles {
			keys, err := satoken.LoadPublicKeys(path)
			if err != nil {
				saSigner <- signerResult{err: fmt.Errorf("service account key: %w", err)}
				return
			}
			verifying = append(verifying, keys...)
		}
		signer, err := satoken.NewSigner(key, opts.ServiceAccountIssuers, verifying...)
		saSigner <- signerResult{signer, err}
	}
	joining := opts.Join != nil && opts.EtcdServers == "" && !hasEtcdData(dir)
	if !joining {
		go loadSigner()
	}

	advertise, err := advertiseIP(opts.AdvertiseAddress, opts.BindAddress)
	if err != nil {
		return nil, err
	}
	var client *clientv3.Client
	var member *etcd.Member
	if opts.EtcdServers != "" {
		if opts.ClusterInit || opts.Join != nil {
			return nil, fmt.Errorf("--cluster-init and --server make a cluster of embedded etcd members; they do not go with --etcd-servers")
		}
		var files *etcd.TLSFiles
		if opts.EtcdCAFile != "" || opts.EtcdCertFile != "" || opts.EtcdKeyFile != "" {
			if opts.EtcdCAFile == "" || opts.EtcdCertFile == "" || opts.EtcdKeyFile == "" {
				return nil, fmt.Errorf("--etcd-cafile, --etcd-certfile and --etcd-keyfile go together (mutual TLS)")
			}
			files = &etcd.TLSFiles{CAFile: opts.EtcdCAFile, CertFile: opts.EtcdCertFile, KeyFile: opts.EtcdKeyFile}
		}
		if client, err = etcd.Dial(ctx, opts.EtcdServers, files); err != nil {
			return nil, err
		}
	} else {
		if member, err = embeddedEtcd(ctx, opts, dir, advertise, log); err != nil {
			return nil, err
		}
		client = member.Client()
		recordMembers(ctx, dir, client)
		go keepMemberRecord(ctx, dir, client)
	}
	if joining {
		go loadSigner()
	}
	// The CA is loaded after etcd: a joining server receives it from the cluster.
	ca, err := pki.LoadOrCreateCA(tlsDir, datadir.CAName, "mizzen-ca")
	if err != nil {
		if member != nil {
			member.Close()
		}
		return nil, err
	}

	listener, err := net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.SecurePort)))
	if err != nil {
		if member != nil {
			member.Close()
		}
		return nil, err
	}
	port := listener.Addr().(*net.TCPAddr).Port
	localURL := "https://127.0.0.1:" + strconv.Itoa(port)

	resources := opts.Resources
	if resources == nil {
		resources = catalog.All()
	}
	var openAPI http.Handler
	if opts.OpenAPI != nil {
		if openAPI, err = opts.OpenAPI(resources); err != nil {
			return nil, err
		}
		// Building the documents is the start-up's largest transient allocation.
		debug.FreeOSMemory()
	}
	sa := <-saSigner
	if sa.err != nil {
		if member != nil {
			member.Close()
		}
		_ = listener.Close()
		return nil, sa.err
	}
	kubeletClient, err := kubeletClientTLS(ca, tlsDir, opts.KubeletCertificateAuthority)
	if err != nil {
		return nil, err
	}
	frontProxy, err := frontProxyConfig(tlsDir)
	if err != nil {
		return nil, err
	}
	srv, err := apiserver.New(apiserver.Config{
		Store: storage.NewStore(client), Resources: resources, ClientCAs: ca.Pool(), ServiceCIDR: serviceCIDR,
		Log: log, ExternalAddress: net.JoinHostPort(advertise.String(), strconv.Itoa(port)), OpenAPI: openAPI,
		ServiceAccountIssuer:        sa.signer,
		AdmissionPlugins:            admissionPlugins,
		StorageValidators:           storageValidators,
		KubeletClientTLS:            kubeletClient,
		Authorizer:                  authorizer,
		FrontProxy:                  frontProxy,
		ClientCAPEM:                 ca.CertPEM,
		BootstrapTokenAuth:          true,
		AnonymousAuth:               !opts.DisableAnonymousAuth && authorizer != nil,
		UI:                          opts.UI,
		Profiling:                   opts.Profiling,
		FlightRecorder:              opts.FlightRecorder,
		DisablePriorityAndFairness:  opts.DisablePriorityAndFairness,
		MaxRequestsInflight:         opts.MaxRequestsInflight,
		MaxMutatingRequestsInflight: opts.MaxMutatingRequestsInflight,
	})
	if err != nil {
		return nil, err
	}
	hosts, ips := servingNames(opts.BindAddress, srv.KubernetesServiceIP())
	serving, err := ca.IssueServing("kube-apiserver", hosts, ips)
	if err != nil {
		return nil, err
	}
	if err := serving.Write(dir.Cert(datadir.APIServerServing)); err != nil {
		return nil, err
	}
	servingPair, err := serving.TLS()
	if err != nil {
		return nil, err
	}
	admin, err := ca.LoadOrIssueClient(tlsDir, "admin", "system:admin", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	kubeconfig := dir.AdminKubeconfig()
	if err := pki.WriteKubeconfig(kubeconfig, localURL, ca.CertPEM, admin, "admin"); err != nil {
		return nil, err
	}

	cp := &ControlPlane{AdminKubeconfig: kubeconfig, URL: localURL, Done: make(chan struct{}), DataDir: opts.DataDir, ca: ca}
	cacheCtx, stopCache := context.WithCancel(ctx)
	go func() { _ = srv.Run(cacheCtx) }()
	readyCtx, cancelReady := context.WithTimeout(ctx, 60*time.Second)
	defer cancelReady()
	if err := srv.WaitCacheSynced(readyCtx); err != nil {
		stopCache()
		return nil, err
	}
	var initial []runtime.Object
	for _, pc := range scheduling.SystemPriorityClasses() {
		initial = append(initial, pc)
	}
	initial = append(initial, flowcontrol.InitialConfiguration()...)
	// The start-up writes are retried, as upstream's post-start hooks poll theirs: on a
	// busy machine etcd answers one with "leader changed" or "request timed out", and
	// every one of them is idempotent.
	if err := retryStartup(readyCtx, log, "initial objects", func() error {
		if err := srv.Bootstrap(ctx, initial...); err != nil {
			return fmt.Errorf("creating the initial objects: %w", err)
		}
		return nil
	}); err != nil {
		stopCache()
		return nil, err
	}
	if err := retryStartup(readyCtx, log, "cluster-info", func() error {
		return publishClusterInfo(ctx, srv, "https://"+net.JoinHostPort(advertise.String(), strconv.Itoa(port)), ca.CertPEM)
	}); err != nil {
		stopCache()
		return nil, err
	}
	if err := retryStartup(readyCtx, log, "RBAC policy", func() error {
		return bootstrapPolicy(readyCtx, srv, authorizer)
	}); err != nil {
		stopCache()
		return nil, err
	}
	srv.MarkReady()
	adminConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		stopCache()
		return nil, err
	}
	var embeddedClient *clientv3.Client
	if member != nil {
		embeddedClient = client
	}
	handler, err := joinHandler(srv, adminConfig, dir, opts.ServiceAccountSigningKeyFile, embeddedClient, log)
	if err != nil {
		stopCache()
		return nil, err
	}

	httpServer := &http.Server{
		Handler: handler,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{servingPair},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: 30 * time.Second,
		// Every watch is a stream; informers multiplex many over one connection.
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: 1000},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		err := httpServer.ServeTLS(listener, "", "")
		if !errors.Is(err, http.ErrServerClosed) {
			cp.Err = err
		}
	}()
	endpointsCtx, stopEndpoints := context.WithCancel(context.Background())
	endpointsDone := make(chan struct{})
	go func() {
		defer close(endpointsDone)
		srv.RunKubernetesEndpoints(endpointsCtx, advertise)
	}()
	go func() {
		<-ctx.Done()
		// This server leaves the kubernetes Service's endpoints while etcd is still up.
		stopEndpoints()
		<-endpointsDone
		// Watches end with the cache (ctx is its parent), so in-flight requests are what
		// graceful shutdown waits for. Whatever is still open after the grace period is
		// cut before etcd goes: a kept-alive connection must not reach a handler whose
		// store has stopped.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(shutdownCtx)
		_ = httpServer.Close()
		stopCache()
		_ = client.Close()
		if member != nil {
			member.Close()
		}
		close(cp.Done)
	}()
	cp.AdminConfig = adminConfig
	log.Info("apiserver ready", "url", localURL, "kubeconfig", kubeconfig)
	if opts.ManageMemory {
		// From here on: start-up is over, so its pages of the executable can go.
		go idlemem.Run(ctx, log)
		go gcpace.Run(ctx, log)
	}
	return cp, nil
}

// EmbeddedEtcdMember is the name and peer URL of a single server's embedded member; a
// snapshot restored for it (--cluster-reset) must name it alike. Its peer port is a
// free loopback port no other member ever dials; it is served with mutual TLS all the
// same, as every member's.
var EmbeddedEtcdMember = etcdsnapshot.Member{Name: "mizzen", PeerURL: "https://127.0.0.1:0"}

// startEmbeddedEtcd starts a single server's member. The apiserver talks to it
// in-process; it also serves clients with mutual TLS of its own CA on a free loopback
// port, recorded in the data directory, so `mizzen etcd-snapshot` reaches it.
func startEmbeddedEtcd(ctx context.Context, dir datadir.Dir, log *slog.Logger) (*etcd.Member, error) {
	tlsFiles, err := etcdsnapshot.EmbeddedClientTLS(dir)
	if err != nil {
		return nil, fmt.Errorf("etcd certificates: %w", err)
	}
	peerFiles, err := etcdsnapshot.EmbeddedPeerTLS(dir)
	if err != nil {
		return nil, fmt.Errorf("etcd certificates: %w", err)
	}
	member, err := etcd.Start(ctx, etcd.MemberConfig{Name: EmbeddedEtcdMember.Name, DataDir: dir.Etcd(),
		PeerURLs: []string{EmbeddedEtcdMember.PeerURL}, ClientURLs: []string{"https://127.0.0.1:0"}, ClientTLS: tlsFiles, PeerTLS: peerFiles,
		Alone: true}, log)
	if err != nil {
		return nil, err
	}
	if urls := member.ClientURLs(); len(urls) > 0 {
		if err := etcdsnapshot.PublishClientURL(dir, urls[0]); err != nil {
			member.Close()
			return nil, err
		}
	}
	return member, nil
}

// authorization builds the authorizer of --authorization-mode, and the admission
// steps that go with it (RBAC's escalation check). AlwaysAllow is no authorizer.
func authorization(mode string) (apiserver.Authorizer, []admission.Validator, error) {
	switch mode {
	case "RBAC":
		a := rbacauthz.New()
		// The modes the request chain asks, in order; another authorizer (Node) is one
		// more member.
		return authz.Union{a}, []admission.Validator{a.EscalationCheck()}, nil
	case "", "Node,RBAC":
		// The Node authorizer first, as kubeadm configures it: kubelets get their own
		// node's objects from it and nothing from RBAC's system:node binding.
		a := rbacauthz.New()
		return authz.Union{node.New(bootstrappolicy.NodeRules()), a}, []admission.Validator{a.EscalationCheck()}, nil
	case "AlwaysAllow":
		return nil, nil, nil
	}
	return nil, nil, fmt.Errorf("--authorization-mode: unsupported mode %q (supported: Node,RBAC, RBAC, AlwaysAllow)", mode)
}

// retryStartup runs step until it succeeds or ctx ends, logging each failure under
// the step's name; it returns the last failure.
func retryStartup(ctx context.Context, log *slog.Logger, what string, step func() error) error {
	for {
		err := step()
		if err == nil {
			return nil
		}
		log.Warn("apiserver start-up step failed, retrying", "step", what, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bootstrapPolicy creates and reconciles the default RBAC policy when RBAC is on, and
// waits until the authorizer applies it, so that the components started next are
// let in from their first request.
func bootstrapPolicy(ctx context.Context, srv *apiserver.Server, authorizer apiserver.Authorizer) error {
	if _, ok := authz.Find[*rbacauthz.Authorizer](authorizer); !ok {
		return nil
	}
	for _, item := range bootstrappolicy.Items() {
		if err := srv.Reconcile(ctx, item.Desired, item.Reconcile); err != nil {
			return fmt.Errorf("the default RBAC policy: %w", err)
		}
	}
	return srv.WaitAuthorizerFresh(ctx)
}

// advertiseIP is the address clients are told to use: the one given, else the bind
// address, else (bound to every interface) the machine's primary address, or loopback
// on a machine without one.
func advertiseIP(given, bind string) (net.IP, error) {
	if given != "" {
		ip := net.ParseIP(given)
		if ip == nil || ip.To4() == nil || ip.IsUnspecified() {
			return nil, fmt.Errorf("--advertise-address %q: an IPv4 address is required", given)
		}
		return ip, nil
	}
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		return ip, nil
	}
	if ip, err := hostaddr.PrimaryIPv4(); err == nil {
		return ip, nil
	}
	return net.ParseIP("127.0.0.1"), nil
}

// servingNames are the names and addresses the serving certificate is valid for.
func servingNames(bind string, serviceIP net.IP) ([]string, []net.IP) {
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if serviceIP != nil {
		ips = append(ips, serviceIP)
	}
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				ips = append(ips, ipn.IP)
			}
		}
	}
	return hosts, ips
}

// kubeletClientTLS is how the apiserver reaches kubelets: with a client certificate of
// the identity kubelets let through, verifying their serving certificates against
// caFile when given. Without one they are not verified, as upstream: a kubelet serves
// with a self-signed certificate unless it is given one.
func kubeletClientTLS(ca *pki.CA, dir, caFile string) (*tls.Config, error) {
	issued, err := ca.LoadOrIssueClient(dir, "apiserver-kubelet-client", nodeserver.APIServerClientUser, nil)
	if err != nil {
		return nil, err
	}
	pair, err := issued.TLS()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if caFile == "" {
		cfg.InsecureSkipVerify = true
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--kubelet-certificate-authority: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--kubelet-certificate-authority %s: no certificates", caFile)
	}
	return cfg, nil
}

// frontProxyCAName is the base name of the front-proxy CA's files in DataDir/tls.
const frontProxyCAName = "front-proxy-ca"

// FrontProxyClientName is the common name of the apiserver's front-proxy client
// certificate, the one name aggregated servers accept forwarded users from.
const FrontProxyClientName = "front-proxy-client"

// frontProxyConfig is how the apiserver authenticates to aggregated API servers: a
// client certificate of a CA of its own (front-proxy-ca, as kubeadm makes it), so that
// no client certificate of the cluster CA can pass for the apiserver forwarding a user.
func frontProxyConfig(dir string) (*apiserver.FrontProxyConfig, error) {
	ca, err := pki.LoadOrCreateCA(dir, frontProxyCAName, "front-proxy-ca")
	if err != nil {
		return nil, err
	}
	issued, err := ca.LoadOrIssueClient(dir, "front-proxy-client", FrontProxyClientName, nil)
	if err != nil {
		return nil, err
	}
	pair, err := issued.TLS()
	if err != nil {
		return nil, err
	}
	return &apiserver.FrontProxyConfig{ClientCertificate: pair, CAPEM: ca.CertPEM, AllowedNames: []string{FrontProxyClientName}}, nil
}

// CAFile is the cluster CA's certificate: kubelets verify the apiserver's client
// certificate against it (--client-ca-file).
func (cp *ControlPlane) CAFile() string { return datadir.Dir(cp.DataDir).CACert() }

// KubeletServing issues a serving certificate for the node server of a kubelet on this
// machine, valid for hostname and the machine's addresses, kept as
// DataDir/tls/<name>.{crt,key}; it returns the two files.
func (cp *ControlPlane) KubeletServing(name, hostname string) (certFile, keyFile string, err error) {
	hosts, ips := servingNames("0.0.0.0", nil)
	hosts = append(hosts, hostname)
	issued, err := cp.ca.IssueServing(hostname, hosts, ips)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = datadir.Dir(cp.DataDir).Cert(name)
	if err := issued.Write(certFile, keyFile); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// ComponentConfig gives a bundled component credentials of its own (a client
// certificate for user, in groups), kept as DataDir/<name>.kubeconfig, and returns a
// rest config for them: components reach the apiserver as any other client does.
func (cp *ControlPlane) ComponentConfig(name, user string, groups []string) (*rest.Config, error) {
	dir := datadir.Dir(cp.DataDir)
	cert, err := cp.ca.LoadOrIssueClient(dir.TLS(), name, user, groups)
	if err != nil {
		return nil, err
	}
	path := dir.Kubeconfig(name)
	if err := pki.WriteKubeconfig(path, cp.URL, cp.ca.CertPEM, cert, user); err != nil {
		return nil, err
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

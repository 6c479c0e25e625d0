package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/controllermanager"
	"mizzen/internal/dns"
	"mizzen/internal/hostaddr"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/metrics"
	"mizzen/internal/proxy"
	"mizzen/internal/scheduler"
	"mizzen/internal/server"
)

func init() { register(newServerCommand) }

// serverFlags are shared by `mizzen server` and `mizzen apiserver`.
type serverFlags struct {
	dataDir     string
	bindAddress string
	advertise   string
	securePort  int
	etcdServers string
	serviceCIDR string
	disable     []string
	verbose     bool
	clusterCIDR string
	podBridge   string
	kubeletPort int32
	kubeletCA   string
	// controllerManagerPort serves the bundled controller-manager's /healthz and /metrics.
	controllerManagerPort int

	serviceAccountKeyFile string
	serviceAccountIssuer  string
	enableAdmission       []string
	disableAdmission      []string
	authorizationMode     string
}

func (f *serverFlags) add(cmd *cobra.Command, withDisable bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the cluster's state: certificates, kubeconfigs, embedded etcd")
	fl.StringVar(&f.bindAddress, "bind-address", "0.0.0.0", "address the apiserver listens on")
	fl.StringVar(&f.advertise, "advertise-address", "", "IP the kubernetes Service's endpoints give in-cluster clients (default: --bind-address, or the machine's primary address)")
	fl.IntVar(&f.securePort, "secure-port", 6443, "HTTPS port of the apiserver")
	fl.StringVar(&f.etcdServers, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster (default: embedded etcd)")
	fl.StringVar(&f.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "CIDR that service cluster IPs are allocated from")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug messages")
	fl.StringVar(&f.serviceAccountKeyFile, "service-account-key-file", "", "RSA private key (PEM) signing and verifying service account tokens; apiservers of one cluster must share it (default DATA_DIR/tls/sa.key, created if missing)")
	fl.StringVar(&f.serviceAccountIssuer, "service-account-issuer", "", "issuer (iss claim) of service account tokens (default https://kubernetes.default.svc.cluster.local)")
	fl.StringSliceVar(&f.enableAdmission, "enable-admission-plugins", nil, "admission plugins to run besides those on by default, by upstream's names (see docs/admission.md); the chain runs them in upstream's order")
	fl.StringSliceVar(&f.disableAdmission, "disable-admission-plugins", nil, "admission plugins not to run, even though on by default")
	fl.StringVar(&f.authorizationMode, "authorization-mode", "RBAC", "how requests are authorized: RBAC (roles and bindings, with the default policy created at start) or AlwaysAllow (every authenticated user may do anything)")
	fl.StringVar(&f.kubeletCA, "kubelet-certificate-authority", "", "CA bundle that kubelets' serving certificates are verified against (default: not verified, as upstream; DATA_DIR/tls/ca.crt verifies agents whose serving certificates the cluster CA issued, such as the bundled one)")
	if withDisable {
		fl.StringSliceVar(&f.disable, "disable", nil, "bundled components not to run (scheduler, controller-manager, agent, proxy, dns, metrics-server)")
	}
}

func (f *serverFlags) options() server.Options {
	return server.Options{
		DataDir: f.dataDir, BindAddress: f.bindAddress, SecurePort: f.securePort, AdvertiseAddress: f.advertise,
		EtcdServers: f.etcdServers, ServiceCIDR: f.serviceCIDR, Log: newLogger(f.verbose),
		OpenAPI: openAPIHandler, KubeletCertificateAuthority: f.kubeletCA,
		ServiceAccountKeyFile: f.serviceAccountKeyFile, ServiceAccountIssuer: f.serviceAccountIssuer,
		EnableAdmissionPlugins: f.enableAdmission, DisableAdmissionPlugins: f.disableAdmission, AuthorizationMode: f.authorizationMode,
	}
}

func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a control plane: embedded etcd, apiserver, and the bundled components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, d := range f.disable {
				if !knownComponents[d] {
					return fmt.Errorf("--disable: unknown component %q", d)
				}
			}
			return runBundle(f)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&f.clusterCIDR, "cluster-cidr", "10.244.0.0/16", "CIDR that node pod CIDRs are allocated from")
	cmd.Flags().StringVar(&f.podBridge, "pod-bridge", "mizzen0", "the agent's pod network bridge (distinct per cluster when several share a host)")
	cmd.Flags().Int32Var(&f.kubeletPort, "kubelet-port", 10250, "the agent's kubelet port")
	cmd.Flags().IntVar(&f.controllerManagerPort, "controller-manager-secure-port", 10257, "HTTPS port of the controller-manager's /healthz and /metrics (0 disables)")
	return cmd
}

// runBundle starts the control plane, then the bundled components that are not
// disabled, each reaching the apiserver only through its URL and credentials.
func runBundle(f serverFlags) error {
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The control plane outlives the components on the way down, so that they can still
	// release their leader Leases and finish their writes: a scheduler whose Lease is
	// left behind keeps the next server's scheduler waiting for it to expire.
	cpCtx, stopControlPlane := context.WithCancel(context.Background())
	defer stopControlPlane()
	ctx, stopComponents := context.WithCancel(signalled)
	defer stopComponents()
	opts := f.options()
	cp, err := server.Start(cpCtx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mizzen apiserver listening on %s; kubeconfig %s\n", cp.URL, cp.AdminKubeconfig)
	disabled := map[string]bool{}
	for _, d := range f.disable {
		disabled[d] = true
	}
	errs := make(chan error, len(knownComponents))
	running := 0 // components started, each sends once on errs when it ends
	if !disabled["scheduler"] {
		cfg, err := cp.ComponentConfig("scheduler", "system:kube-scheduler", nil)
		if err != nil {
			return err
		}
		// The scheduler's writes are one bind per pod: upstream's default client limit
		// (50/s) would be its ceiling.
		cfg.QPS, cfg.Burst = 2000, 4000
		running++
		go func() {
			errs <- wrapErr("scheduler", scheduler.Run(ctx, scheduler.Options{RestConfig: cfg, MetricsAddr: "0", Logger: opts.Log.With("component", "scheduler")}))
		}()
	}
	if !disabled["controller-manager"] {
		cfg, err := cp.ComponentConfig("controller-manager", "system:kube-controller-manager", nil)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 500, 1000
		var serving *controllermanager.ServingOptions
		if f.controllerManagerPort > 0 {
			serving = &controllermanager.ServingOptions{BindAddress: f.bindAddress, Port: f.controllerManagerPort}
		}
		running++
		go func() {
			errs <- wrapErr("controller-manager", controllermanager.Run(ctx, cfg, controllermanager.RunOptions{
				Options: controllermanager.Options{
					ConcurrentSyncs: 5, NodeMonitorGracePeriod: 40 * time.Second, ClusterCIDR: f.clusterCIDR,
					NodeCIDRMaskSize: 24, TerminatedPodGCThreshold: 12500,
				},
				Controllers: []string{"*"}, LeaderElect: true, Serving: serving,
			}))
		}()
	}
	// Cluster DNS and the metrics server run beside the control plane, as k3s runs
	// them, reached through Services whose endpoint is this machine.
	var clusterDNS net.IP
	if !disabled["dns"] {
		if clusterDNS, err = startDNS(ctx, cp, f, opts.Log, errs); err != nil {
			return fmt.Errorf("dns: %w, or run with --disable dns", err)
		}
		running++
	}
	if !disabled["metrics-server"] {
		if err := startMetricsServer(ctx, cp, opts.Log, errs); err != nil {
			return fmt.Errorf("metrics-server: %w, or run with --disable metrics-server", err)
		}
		running++
	}
	if !disabled["agent"] {
		kf, err := agentKubeletFlags(f.dataDir, "", f.kubeletPort, f.podBridge)
		if err != nil {
			return fmt.Errorf("%w, or run with --disable agent", err)
		}
		cfg, err := cp.ComponentConfig("kubelet", "system:node:"+kf.hostnameOverride, []string{"system:nodes"})
		if err != nil {
			return err
		}
		certFile, keyFile, err := cp.KubeletServing("kubelet-serving", kf.hostnameOverride)
		if err != nil {
			return err
		}
		kf.tlsCertFile, kf.tlsKeyFile, kf.clientCAFile = certFile, keyFile, cp.CAFile()
		if clusterDNS != nil {
			kf.clusterDNS = []string{clusterDNS.String()}
		}
		running++
		go func() { errs <- wrapErr("agent", runKubelet(ctx, cfg, kf)) }()
		if !disabled["proxy"] {
			proxyCfg, err := cp.ComponentConfig("kube-proxy", "system:kube-proxy", nil)
			if err != nil {
				return err
			}
			pf := proxyFlags{hostnameOverride: kf.hostnameOverride, clusterCIDR: f.clusterCIDR, table: proxy.TableNameFor(f.podBridge)}
			running++
			go func() {
				errs <- wrapErr("proxy", runProxy(ctx, proxyCfg, pf, opts.Log.With("component", "proxy")))
			}()
		}
	}
	return shutDownBundle(signalled, cp, errs, running, stopComponents, stopControlPlane)
}

// shutDownBundle waits for a signal, the control plane's end or a component's failure,
// then stops the running components, waiting up to 20 s for them, and then the control
// plane. The error is the first failure's, if anything failed before the signal.
func shutDownBundle(signalled context.Context, cp *server.ControlPlane, errs <-chan error, running int, stopComponents, stopControlPlane func()) error {
	var failed error
	for failed == nil && signalled.Err() == nil {
		select {
		case <-cp.Done:
			stopComponents()
			return cp.Err
		case <-signalled.Done():
		case err := <-errs:
			running--
			failed = err
		}
	}
	stopComponents()
	timeout := time.After(20 * time.Second)
wait:
	for running > 0 {
		select {
		case <-errs:
			running--
		case <-timeout:
			break wait
		}
	}
	stopControlPlane()
	<-cp.Done
	if failed != nil {
		return failed
	}
	return cp.Err
}

func wrapErr(component string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", component, err)
}

// knownComponents are the names --disable accepts.
var knownComponents = map[string]bool{"scheduler": true, "controller-manager": true, "agent": true, "proxy": true, "dns": true, "metrics-server": true}

// startDNS runs cluster DNS on this machine's address (a free port) and publishes it as
// kube-system/kube-dns at the service CIDR's 10th address, which it returns for the
// kubelet's --cluster-dns. The server's end is sent on errs.
func startDNS(ctx context.Context, cp *server.ControlPlane, f serverFlags, log *slog.Logger, errs chan<- error) (net.IP, error) {
	serviceIP, err := dns.ServiceIP(f.serviceCIDR)
	if err != nil {
		return nil, err
	}
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return nil, fmt.Errorf("pods reach DNS at this machine's address: %w", err)
	}
	cfg, err := cp.ComponentConfig("dns", dnsUser, nil)
	if err != nil {
		return nil, err
	}
	admin, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		return nil, err
	}
	opts := dns.Options{Listen: net.JoinHostPort(hostIP.String(), "0"), ClusterDomain: "cluster.local", TTL: dns.DefaultTTL,
		UpstreamResolvConf: dns.DefaultUpstreamResolvConf, Logger: log.With("component", "dns")}
	go func() {
		errs <- wrapErr("dns", dns.Run(ctx, cfg, opts, func(ctx context.Context, addr net.Addr) error {
			return dns.Publish(ctx, admin, serviceIP, addr)
		}))
	}()
	return serviceIP, nil
}

// dnsUser is the bundled DNS server's identity.
const dnsUser = "system:kube-dns"

// startMetricsServer runs the metrics server on this machine's address (a free port)
// and registers it as the metrics.k8s.io API. The server's end is sent on errs.
func startMetricsServer(ctx context.Context, cp *server.ControlPlane, log *slog.Logger, errs chan<- error) error {
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return fmt.Errorf("the apiserver reaches it at this machine's address: %w", err)
	}
	cfg, err := cp.ComponentConfig("metrics-server", nodeserver.MetricsServerUser, nil)
	if err != nil {
		return err
	}
	certFile, keyFile, err := cp.KubeletServing("metrics-server-serving", metrics.ServiceName+"."+metrics.ServiceNamespace+".svc")
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(cp.CAFile())
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(hostIP.String(), "0"))
	if err != nil {
		return err
	}
	port := int32(listener.Addr().(*net.TCPAddr).Port)
	if err := metrics.Register(ctx, cp.AdminConfig, metrics.Registration{Address: hostIP.String(), Port: port, CABundle: caPEM}); err != nil {
		_ = listener.Close()
		return err
	}
	go func() {
		errs <- wrapErr("metrics-server", metrics.Run(ctx, metrics.Options{Config: cfg, Listener: listener,
			CertFile: certFile, KeyFile: keyFile, Log: log.With("component", "metrics-server")}))
	}()
	return nil
}

// runControlPlane starts the control plane and waits for SIGINT or SIGTERM.
func runControlPlane(opts server.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := server.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mizzen apiserver listening on %s; kubeconfig %s\n", cp.URL, cp.AdminKubeconfig)
	<-cp.Done
	return cp.Err
}

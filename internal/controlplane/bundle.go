// Package controlplane is the server bundle, `mizzen server`: the core (etcd and the
// apiserver, package core) and the components bundled beside it (scheduler,
// controller-manager, DNS, metrics server, ingress, and an agent), each reaching the
// apiserver only through its URL and credentials of its own, as k3s bundles them.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/agent"
	"mizzen/internal/cloud/ccm"
	"mizzen/internal/cloud/local"
	"mizzen/internal/componentserve"
	"mizzen/internal/controllermanager"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/controlplane/nodemember"
	"mizzen/internal/dashboard"
	"mizzen/internal/datadir"
	"mizzen/internal/dns"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/hostaddr"
	"mizzen/internal/ingress"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/leaderlost"
	"mizzen/internal/metrics"
	"mizzen/internal/netpol"
	"mizzen/internal/podnet"
	"mizzen/internal/scheduler"
)

// Components are the bundled components `mizzen server --disable` may leave out.
var Components = []string{"scheduler", "controller-manager", "cloud-controller-manager", "agent", "proxy", "dns", "metrics-server", "ingress", "dashboard", "network-policy"}

// BundleOptions configure `mizzen server`: the control plane and the components
// bundled beside it.
type BundleOptions struct {
	core.Options
	// Disable names components (of Components) not to run.
	Disable     []string
	ClusterCIDR string
	// PodBridge is the agent's pod network bridge, distinct per cluster on one host.
	PodBridge string
	// PodNetwork is the agent's pod network across nodes (vxlan, host-gw, none), with
	// the vxlan backend's VNI and port.
	PodNetwork         string
	VXLANID, VXLANPort int
	KubeletPort        int32
	// Containerd and PrivateRegistry are the agent's containerd binary and
	// registries.yaml (as `mizzen agent --containerd --private-registry`).
	Containerd, PrivateRegistry string
	// NodeIP is the bundled kubelet's InternalIP (empty: the machine's primary address),
	// as `mizzen agent --node-ip`.
	NodeIP string
	// IngressHTTPPort and IngressHTTPSPort are the bundled Ingress controller's ports on
	// every address of the node; 0 serves none.
	IngressHTTPPort, IngressHTTPSPort int
	// DashboardPort serves the dashboard's HTTPS on the bind address; 0 runs none.
	DashboardPort int
	// ProxyHealthzPort is where the agent's service proxy serves /healthz and /livez on
	// every address (upstream's 10256); 0 serves none. The dashboard asks it.
	ProxyHealthzPort int
	// ProxyMetricsAddress is where the agent's service proxy serves /metrics and
	// /proxyMode (upstream's 127.0.0.1:10249); empty or "0" serves nothing.
	ProxyMetricsAddress string
	// MetricResolution is the bundled metrics server's scrape interval (0: its default).
	MetricResolution time.Duration
	// ControllerManagerPort serves the controller-manager's /healthz and /metrics; 0 disables.
	ControllerManagerPort int
	// SchedulerPort serves the scheduler's /healthz and /metrics; 0 disables.
	SchedulerPort int
	// CloudProvider configures the bundled cloud-controller-manager's provider, local.
	CloudProvider local.Options
	// KubeletCloudProvider is the bundled agent's kubelet --cloud-provider: "" or
	// "external" (the node waits for the cloud-controller-manager).
	KubeletCloudProvider string
	// Snapshots are the embedded etcd's scheduled snapshots.
	Snapshots SnapshotOptions
	// Ready, when set, is called once every component has been started.
	Ready func(cp *core.ControlPlane)
}

// RunBundle starts the control plane, then the bundled components that are not
// disabled, each reaching the apiserver only through its URL and credentials, and runs
// them until ctx ends or one of them fails.
func RunBundle(ctx context.Context, opts BundleOptions) error {
	for _, d := range opts.Disable {
		if !slices.Contains(Components, d) {
			return fmt.Errorf("--disable: unknown component %q (known: %v)", d, Components)
		}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	disabled := func(name string) bool { return slices.Contains(opts.Disable, name) }
	if opts.KubeletCloudProvider != "" && disabled("cloud-controller-manager") {
		return fmt.Errorf("the agent's kubelet runs with --cloud-provider %s, which needs the cloud-controller-manager: its node would stay tainted uninitialized", opts.KubeletCloudProvider)
	}
	// The control plane outlives the components on the way down, so that they can still
	// release their leader Leases and finish their writes: a scheduler whose Lease is
	// left behind keeps the next server's scheduler waiting for it to expire.
	cpCtx, stopControlPlane := context.WithCancel(context.Background())
	defer stopControlPlane()
	componentsCtx, stopComponents := context.WithCancel(ctx)
	defer stopComponents()
	snapshots, err := scheduledSnapshots(opts)
	if err != nil {
		return err
	}
	if !disabled("dashboard") {
		// The dashboard at the apiserver's /ui/, logging in with the browser's client
		// certificate (docs/dashboard.md), beside its own port.
		ui, err := dashboard.NewUI(opts.ProxyHealthzPort, opts.Log.With("component", "dashboard"))
		if err != nil {
			return err
		}
		opts.Options.UI = ui
	}
	cp, err := core.Start(cpCtx, opts.Options)
	if err != nil {
		return err
	}
	errs := make(chan error, len(Components)+2)
	running := 0 // components started, each sends once on errs when it ends
	start := func(name string, run func(context.Context) error) {
		running++
		go func() { errs <- wrapErr(name, restartOnLostLease(componentsCtx, name, run, opts.Log)) }()
	}
	fail := func(err error) error {
		return shutDown(ctx, cp, errs, running, err, stopComponents, stopControlPlane)
	}
	if !disabled("scheduler") {
		cfg, err := cp.ComponentConfig("scheduler", "system:kube-scheduler", nil)
		if err != nil {
			return fail(err)
		}
		// The scheduler's writes are one bind per pod: upstream's default client limit
		// (50/s) would be its ceiling.
		cfg.QPS, cfg.Burst = 2000, 4000
		var serving *componentserve.Options
		if opts.SchedulerPort > 0 {
			serving = &componentserve.Options{BindAddress: opts.BindAddress, Port: opts.SchedulerPort}
		}
		start("scheduler", func(ctx context.Context) error {
			return scheduler.Run(ctx, scheduler.Options{RestConfig: cfg, MetricsAddr: "0", Serving: serving, Logger: opts.Log.With("component", "scheduler")})
		})
	}
	if !disabled("controller-manager") {
		cfg, err := cp.ComponentConfig("controller-manager", "system:kube-controller-manager", nil)
		if err != nil {
			return fail(err)
		}
		cfg.QPS, cfg.Burst = 500, 1000
		var serving *controllermanager.ServingOptions
		if opts.ControllerManagerPort > 0 {
			serving = &controllermanager.ServingOptions{BindAddress: opts.BindAddress, Port: opts.ControllerManagerPort}
		}
		start("controller-manager", func(ctx context.Context) error {
			return controllermanager.Run(ctx, cfg, controllermanager.RunOptions{
				Options: controllermanager.Options{
					ConcurrentSyncs: 5, NodeMonitorGracePeriod: 40 * time.Second, ClusterCIDR: opts.ClusterCIDR,
					NodeCIDRMaskSize: 24, TerminatedPodGCThreshold: 12500,
					ClusterSigningCertFile: cp.CAFile(), ClusterSigningKeyFile: cp.CAKeyFile(),
				},
				Controllers: []string{"*"}, LeaderElect: true, Serving: serving,
				// Each controller as its own ServiceAccount, as kubeadm runs them, so that
				// system:kube-controller-manager holds only upstream's narrow role.
				UseServiceAccountCredentials: true,
			})
		})
	}
	if !disabled("cloud-controller-manager") {
		run, err := cloudControllerRunner(cp, opts)
		if err != nil {
			return fail(fmt.Errorf("cloud-controller-manager: %w, or run with --disable cloud-controller-manager", err))
		}
		start("cloud-controller-manager", run)
	}
	// Cluster DNS and the metrics server run beside the control plane, as k3s runs
	// them, reached through Services with an endpoint on every server running them.
	var clusterDNS net.IP
	if !disabled("dns") {
		run, serviceIP, err := dnsRunner(cp, opts.ServiceCIDR, opts.Log)
		if err != nil {
			return fail(fmt.Errorf("dns: %w, or run with --disable dns", err))
		}
		clusterDNS = serviceIP
		start("dns", run)
	}
	if !disabled("metrics-server") {
		run, err := metricsServerRunner(ctx, cp, opts.MetricResolution, opts.Log)
		if err != nil {
			return fail(fmt.Errorf("metrics-server: %w, or run with --disable metrics-server", err))
		}
		start("metrics-server", run)
	}
	if !disabled("ingress") {
		run, err := ingressRunner(ctx, cp, opts)
		if err != nil {
			return fail(fmt.Errorf("ingress: %w, or run with --disable ingress", err))
		}
		start("ingress", run)
	}
	if !disabled("dashboard") {
		fmt.Fprintf(os.Stderr, "mizzen dashboard at %s%s (log in with a client certificate or a token: docs/dashboard.md)\n", strings.TrimSuffix(cp.URL, "/"), dashboard.UIPath)
	}
	if !disabled("dashboard") && opts.DashboardPort > 0 {
		run, err := dashboardRunner(cp, opts)
		if err != nil {
			return fail(fmt.Errorf("dashboard: %w, or run with --disable dashboard", err))
		}
		start("dashboard", run)
	}
	nodeName := ""
	if !disabled("agent") {
		ao, err := bundledAgent(cp, opts, clusterDNS, !disabled("proxy"), !disabled("network-policy"), !disabled("controller-manager"))
		if err != nil {
			return fail(fmt.Errorf("%w, or run with --disable agent", err))
		}
		nodeName = ao.Kubelet.HostnameOverride
		start("agent", func(ctx context.Context) error {
			if ao.Joined == nil && ao.KubeletConfig == nil {
				if err := joinOwnAgent(ctx, cp, &ao, opts.Log); err != nil {
					return err
				}
			}
			return agent.Run(ctx, ao)
		})
	}
	if run, err := etcdMemberRemoval(cp, opts, nodeName); err != nil {
		return fail(err)
	} else if run != nil {
		start("etcd-member-removal", run)
	}
	if snapshots != nil {
		start("etcd-snapshot", snapshots)
	}
	if opts.Ready != nil {
		opts.Ready(cp)
	}
	return shutDown(ctx, cp, errs, running, nil, stopComponents, stopControlPlane)
}

// bundledAgent are the settings of the agent `mizzen server` runs on its own machine:
// the kubelet, and the proxy unless withProxy is false. With the controller-manager
// (joinByToken) the kubelet's credentials come as a joining node's do, through a
// bootstrap token and CSRs (joinOwnAgent fills them in when the agent starts);
// without it, nothing would approve the CSRs, so the kubelet gets a client certificate
// for its node and a serving certificate of the cluster CA directly.
func bundledAgent(cp *core.ControlPlane, opts BundleOptions, clusterDNS net.IP, withProxy, withNetworkPolicy, joinByToken bool) (agent.Options, error) {
	kf, err := agent.AgentKubelet(datadir.Dir(opts.DataDir), "", opts.KubeletPort, opts.PodBridge)
	if err != nil {
		return agent.Options{}, err
	}
	var cfg *rest.Config
	if !joinByToken {
		if cfg, err = cp.ComponentConfig("kubelet", "system:node:"+kf.HostnameOverride, []string{"system:nodes"}); err != nil {
			return agent.Options{}, err
		}
		certFile, keyFile, err := cp.KubeletServing("kubelet-serving", kf.HostnameOverride)
		if err != nil {
			return agent.Options{}, err
		}
		kf.TLSCertFile, kf.TLSKeyFile = certFile, keyFile
	}
	kf.ClientCA, kf.NodeIP = cp.CAFile(), opts.NodeIP
	kf.ContainerdPath, kf.PrivateRegistry = opts.Containerd, opts.PrivateRegistry
	if opts.KubeletCloudProvider == "external" {
		if err := agent.WithExternalCloudProvider(&kf); err != nil {
			return agent.Options{}, err
		}
	} else if opts.KubeletCloudProvider != "" {
		return agent.Options{}, fmt.Errorf("--kubelet-cloud-provider %q: only \"external\" or none", opts.KubeletCloudProvider)
	}
	if clusterDNS != nil {
		kf.ClusterDNS = []string{clusterDNS.String()}
	}
	if opts.PodNetwork == "" {
		opts.PodNetwork = string(podnet.VXLAN)
	}
	pn, err := agent.PodNetworkFor(&kf, opts.PodNetwork, opts.ClusterCIDR, opts.PodBridge, opts.VXLANID, opts.VXLANPort, opts.Log.With("component", "podnet"))
	if err != nil {
		return agent.Options{}, err
	}
	ao := agent.Options{Kubelet: kf, KubeletConfig: cfg, PodNetwork: pn}
	if withNetworkPolicy {
		if ao.NetworkPolicyConfig, err = cp.ComponentConfig("network-policy", netpol.User, nil); err != nil {
			return agent.Options{}, err
		}
		ao.NetworkPolicy = &agent.NetworkPolicyOptions{Table: netpol.TableName(opts.PodBridge), Log: opts.Log.With("component", "netpol")}
	}
	if withProxy {
		proxyCfg, err := cp.ComponentConfig("kube-proxy", "system:kube-proxy", nil)
		if err != nil {
			return agent.Options{}, err
		}
		po := agent.ProxyFor(kf.HostnameOverride, opts.ClusterCIDR, opts.PodBridge, opts.Log.With("component", "proxy"))
		po.HealthzAddress = agent.ProxyHealthzAddress(opts.ProxyHealthzPort)
		po.MetricsAddress = opts.ProxyMetricsAddress
		ao.Proxy, ao.ProxyConfig = &po, proxyCfg
	}
	return ao, nil
}

// etcdMemberRemoval prepares, on a server of a cluster of servers, the removal of the
// etcd member of a server whose Node is deleted (package nodemember), and the marking
// of this server's own Node, nodeName ("" without a bundled agent). Nothing for a
// single server or an external etcd.
func etcdMemberRemoval(cp *core.ControlPlane, opts BundleOptions, nodeName string) (func(context.Context) error, error) {
	if opts.EtcdServers != "" {
		return nil, nil
	}
	members, own, ok, err := core.ClusterMembers(datadir.Dir(opts.DataDir))
	if err != nil || !ok {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		return nil, err
	}
	log := opts.Log.With("component", "etcd-member-removal")
	return func(ctx context.Context) error {
		if nodeName != "" {
			go nodemember.Mark(ctx, client, nodeName, own, 10*time.Second, log)
		}
		return nodemember.Run(ctx, client, members, own, log)
	}, nil
}

// cloudControllerRunner prepares the cloud-controller-manager on the local provider,
// with the identity system:cloud-controller-manager.
func cloudControllerRunner(cp *core.ControlPlane, opts BundleOptions) (func(context.Context) error, error) {
	cfg, err := cp.ComponentConfig("cloud-controller-manager", ccm.User, nil)
	if err != nil {
		return nil, err
	}
	co := ccm.Options{CloudProvider: local.ProviderName, Local: opts.CloudProvider, LeaderElect: true,
		ClusterCIDR: opts.ClusterCIDR, Log: opts.Log.With("component", "cloud-controller-manager")}
	if _, err := ccm.NewProvider(co); err != nil { // bad flags fail the start
		return nil, err
	}
	return func(ctx context.Context) error { return ccm.Run(ctx, cfg, co) }, nil
}

// SnapshotOptions are --etcd-snapshot-schedule-cron, --etcd-snapshot-retention,
// --etcd-snapshot-dir and --etcd-disable-snapshots.
type SnapshotOptions struct {
	Schedule  string
	Retention int
	Dir       string
	Disable   bool
}

// scheduledSnapshots prepares the embedded etcd's scheduled snapshots into
// DIR/db/snapshots (or Dir); none with an external etcd or when disabled.
func scheduledSnapshots(opts BundleOptions) (func(context.Context) error, error) {
	so := opts.Snapshots
	if so.Disable || opts.EtcdServers != "" {
		return nil, nil
	}
	if so.Schedule == "" {
		so.Schedule = etcdsnapshot.DefaultSchedule
	}
	if so.Retention == 0 {
		so.Retention = etcdsnapshot.DefaultRetention
	}
	if so.Retention < 0 {
		return nil, fmt.Errorf("--etcd-snapshot-retention must be at least 1")
	}
	schedule, err := etcdsnapshot.ParseSchedule(so.Schedule)
	if err != nil {
		return nil, err
	}
	dir := datadir.Dir(opts.DataDir)
	if so.Dir == "" {
		so.Dir = dir.Snapshots()
	}
	s := &etcdsnapshot.Scheduled{Schedule: schedule, Retention: so.Retention, Dir: so.Dir, Node: etcdsnapshot.NodeName(),
		Log: opts.Log.With("component", "etcd-snapshot"),
		Connect: func(ctx context.Context) (*clientv3.Client, error) {
			return etcdsnapshot.Connect(ctx, dir, etcdsnapshot.External{})
		}}
	return s.Run, nil
}

// shutDown waits for ctx's end, the control plane's end or a component's failure, then
// stops the running components, waiting up to 20 s for them, and then the control
// plane. The error is the first failure's, if anything failed before ctx ended.
func shutDown(ctx context.Context, cp *core.ControlPlane, errs <-chan error, running int, failed error, stopComponents, stopControlPlane func()) error {
	for failed == nil && ctx.Err() == nil {
		select {
		case <-cp.Done:
			return cp.Err
		case <-ctx.Done():
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

// dnsUser is the bundled DNS server's identity.
const dnsUser = "system:kube-dns"

// dnsRunner prepares cluster DNS on this machine's address (a free port), published as
// kube-system/kube-dns at the service CIDR's 10th address, which it returns for the
// kubelet's --cluster-dns.
func dnsRunner(cp *core.ControlPlane, serviceCIDR string, log *slog.Logger) (func(context.Context) error, net.IP, error) {
	if serviceCIDR == "" {
		serviceCIDR = core.DefaultServiceCIDR
	}
	serviceIP, err := dns.ServiceIP(serviceCIDR)
	if err != nil {
		return nil, nil, err
	}
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return nil, nil, fmt.Errorf("pods reach DNS at this machine's address: %w", err)
	}
	cfg, err := cp.ComponentConfig("dns", dnsUser, nil)
	if err != nil {
		return nil, nil, err
	}
	admin, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		return nil, nil, err
	}
	opts := dns.Options{Listen: net.JoinHostPort(hostIP.String(), "0"), ClusterDomain: "cluster.local", TTL: dns.DefaultTTL,
		UpstreamResolvConf: dns.DefaultUpstreamResolvConf, Logger: log.With("component", "dns")}
	return func(ctx context.Context) error {
		withdraw := func() {}
		err := dns.Run(ctx, cfg, opts, func(ctx context.Context, addr net.Addr) error {
			pub, err := dns.Publish(ctx, admin, serviceIP, addr, opts.Logger)
			if err != nil {
				return err
			}
			withdraw = pub.Start(ctx)
			return nil
		})
		withdraw()
		return err
	}, serviceIP, nil
}

// metricsServerRunner prepares the metrics server on this machine's address (a free
// port) and registers it as the metrics.k8s.io API. Its client certificate and its
// serving certificate are two files: one overwriting the other once broke every restart.
func metricsServerRunner(ctx context.Context, cp *core.ControlPlane, resolution time.Duration, log *slog.Logger) (func(context.Context) error, error) {
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return nil, fmt.Errorf("the apiserver reaches it at this machine's address: %w", err)
	}
	cfg, err := cp.ComponentConfig("metrics-server", nodeserver.MetricsServerUser, nil)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := cp.KubeletServing("metrics-server-serving", metrics.ServiceName+"."+metrics.ServiceNamespace+".svc")
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(cp.CAFile())
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(hostIP.String(), "0"))
	if err != nil {
		return nil, err
	}
	port := int32(listener.Addr().(*net.TCPAddr).Port)
	log = log.With("component", "metrics-server")
	pub, err := metrics.Register(ctx, cp.AdminConfig, metrics.Registration{Address: hostIP.String(), Port: port, CABundle: caPEM}, log)
	if err != nil {
		_ = listener.Close()
		return nil, err
	}
	return func(ctx context.Context) error {
		// This machine's endpoint stays in the Service while its metrics server runs.
		defer pub.Start(ctx)()
		return metrics.Run(ctx, metrics.Options{Config: cfg, Listener: listener,
			CertFile: certFile, KeyFile: keyFile, Resolution: resolution, Log: log})
	}, nil
}

// ingressRunner prepares the Ingress controller on the node's ports, serving the
// IngressClass mizzen, which it creates (as the default class) unless it exists.
func ingressRunner(ctx context.Context, cp *core.ControlPlane, opts BundleOptions) (func(context.Context) error, error) {
	httpAddr, httpsAddr, status, err := ingress.Addresses("0.0.0.0", opts.IngressHTTPPort, opts.IngressHTTPSPort, opts.AdvertiseAddress)
	if err != nil {
		return nil, err
	}
	admin, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		return nil, err
	}
	if err := ingress.EnsureDefaultClass(ctx, admin); err != nil {
		return nil, err
	}
	cfg, err := cp.ComponentConfig("ingress", ingress.User, nil)
	if err != nil {
		return nil, err
	}
	client, err := ingress.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		srv, err := ingress.Start(ctx, client, ingress.Options{HTTPAddr: httpAddr, HTTPSAddr: httpsAddr, StatusAddress: status,
			Logger: opts.Log.With("component", "ingress")})
		if err != nil {
			return err
		}
		return srv.Wait()
	}, nil
}

// dashboardRunner prepares the web UI on the bind address with a serving certificate of
// the cluster CA, and prints its URL. It is given only the apiserver's address and CA:
// every request it makes carries the logged-in user's token.
func dashboardRunner(cp *core.ControlPlane, opts BundleOptions) (func(context.Context) error, error) {
	certFile, keyFile, err := cp.KubeletServing("dashboard-serving", "mizzen-dashboard")
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.DashboardPort)))
	if err != nil {
		return nil, err
	}
	host := opts.BindAddress
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if primary, err := hostaddr.PrimaryIPv4(); err == nil {
			host = primary.String()
		}
	}
	fmt.Fprintf(os.Stderr, "mizzen dashboard at https://%s/ (log in with a token: docs/dashboard.md)\n", net.JoinHostPort(host, strconv.Itoa(listener.Addr().(*net.TCPAddr).Port)))
	return func(ctx context.Context) error {
		return dashboard.Run(ctx, dashboard.Options{APIServer: rest.AnonymousClientConfig(cp.AdminConfig),
			Listener: listener, CertFile: certFile, KeyFile: keyFile, ProxyHealthzPort: opts.ProxyHealthzPort,
			Log: opts.Log.With("component", "dashboard")})
	}, nil
}

// restartOnLostLease runs a component until it ends, starting it again whenever it
// stops because it lost its Lease (an etcd too slow to renew it in time, say), as a
// kubelet restarts a static pod whose process exits: the rest of the bundle, the
// apiserver and etcd among it, goes on serving meanwhile.
func restartOnLostLease(ctx context.Context, name string, run func(context.Context) error, log *slog.Logger) error {
	for {
		err := run(ctx)
		if !errors.Is(err, leaderlost.ErrLost) || ctx.Err() != nil {
			return err
		}
		log.Warn("lost its Lease; starting it again", "component", name)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

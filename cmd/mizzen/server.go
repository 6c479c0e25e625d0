package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"mizzen/internal/agent"
	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/cloud/local"
	"mizzen/internal/controlplane"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/datadir"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/jointoken"
	"mizzen/internal/metrics"
	"mizzen/internal/podnet"
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
	podNetwork  string
	vxlanID     int
	vxlanPort   int
	kubeletPort int32
	nodeIP      string
	kubeletCA   string
	// ingressHTTPPort and ingressHTTPSPort are the bundled Ingress controller's ports.
	ingressHTTPPort, ingressHTTPSPort int
	// controllerManagerPort serves the bundled controller-manager's /healthz and /metrics.
	controllerManagerPort int
	// schedulerPort serves the bundled scheduler's /healthz and /metrics.
	schedulerPort int
	// dashboardPort serves the bundled dashboard's HTTPS on the bind address.
	dashboardPort int
	// proxyHealthzPort serves the bundled proxy's /healthz on every address.
	proxyHealthzPort int
	// proxyMetricsAddress serves the bundled proxy's /metrics.
	proxyMetricsAddress string
	// metricResolution is the bundled metrics server's scrape interval.
	metricResolution time.Duration

	// cloudProvider configures the bundled cloud-controller-manager's local provider;
	// kubeletCloudProvider is the bundled kubelet's --cloud-provider.
	cloudProvider        local.Options
	kubeletCloudProvider string
	// containerd and privateRegistry are the bundled agent's (--containerd, --private-registry).
	containerd, privateRegistry string

	snapshots               controlplane.SnapshotOptions
	clusterReset            bool
	clusterResetRestorePath string

	serviceAccountSigningKeyFile string
	serviceAccountKeyFiles       []string
	serviceAccountIssuers        []string
	enableAdmission              []string
	disableAdmission             []string
	authorizationMode            string
	anonymousAuth                bool
	profiling                    bool
	flightRecorderWindow         time.Duration
	priorityAndFairness          bool
	maxRequestsInflight          int
	maxMutatingRequestsInflight  int

	etcdCAFile, etcdCertFile, etcdKeyFile string
	clusterInit                           bool
	joinServer, joinToken                 string
	etcdClientPort, etcdPeerPort          int
	remove                                bool
	removeMember                          string
}

func (f *serverFlags) add(cmd *cobra.Command, withDisable bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", datadir.Default, "directory for the cluster's state: certificates, kubeconfigs, embedded etcd")
	fl.StringVar(&f.bindAddress, "bind-address", "0.0.0.0", "address the apiserver listens on")
	fl.StringVar(&f.advertise, "advertise-address", "", "IP the kubernetes Service's endpoints give in-cluster clients (default: --bind-address, or the machine's primary address)")
	fl.IntVar(&f.securePort, "secure-port", 6443, "HTTPS port of the apiserver")
	fl.StringVar(&f.etcdServers, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster (default: embedded etcd)")
	fl.StringVar(&f.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "CIDR that service cluster IPs are allocated from")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug messages")
	fl.StringVar(&f.serviceAccountSigningKeyFile, "service-account-signing-key-file", "", "private key (PEM, RSA or ECDSA P-256/384/521: RS256 or ES256/384/512 tokens) signing and verifying service account tokens; apiservers of one cluster must share it (default DATA_DIR/tls/sa.key, a 2048-bit RSA key created if missing)")
	fl.StringSliceVar(&f.serviceAccountKeyFiles, "service-account-key-file", nil, "PEM file of more keys that verify service account tokens (public or private keys, or certificates; repeatable), such as the previous signing key's while its tokens are in use; alone, without --service-account-signing-key-file, the one private key that signs them")
	// A StringArray as upstream's (pkg/kubeapiserver/options/authentication.go): each use
	// is one issuer, commas included, since a URL may hold one.
	fl.StringArrayVar(&f.serviceAccountIssuers, "service-account-issuer", nil, "issuer (iss claim) of service account tokens (default https://kubernetes.default.svc.cluster.local); repeatable: the first is the issuer of the tokens the server issues and of its OpenID discovery document, tokens of any are accepted, and all are the API audiences")
	fl.StringSliceVar(&f.enableAdmission, "enable-admission-plugins", []string{"NodeRestriction"}, "admission plugins to run besides those on by default, by upstream's names (see docs/admission.md); the chain runs them in upstream's order (NodeRestriction by default, as kubeadm's clusters run it)")
	fl.StringSliceVar(&f.disableAdmission, "disable-admission-plugins", nil, "admission plugins not to run, even though on by default")
	fl.StringVar(&f.authorizationMode, "authorization-mode", "Node,RBAC", "how requests are authorized: Node,RBAC (kubelets get their own node's objects, everyone else what roles and bindings grant, with the default policy created at start), RBAC, or AlwaysAllow (every authenticated user may do anything)")
	fl.BoolVar(&f.profiling, "profiling", true, "serve /debug/pprof/ to clients the authorizer allows (as upstream's kube-apiserver, on by default; the default RBAC roles grant it to no one but system:masters)")
	fl.DurationVar(&f.flightRecorderWindow, "flight-recorder-window", 0, flightRecorderUsage+"; needs --profiling")
	fl.BoolVar(&f.priorityAndFairness, "enable-priority-and-fairness", true, "API Priority and Fairness: requests are classified by the FlowSchemas into priority levels that share the server's seats, queue when their level's seats are taken and are refused (429) when its queues are full (see docs/flowcontrol.md)")
	fl.IntVar(&f.maxRequestsInflight, "max-requests-inflight", flowcontrol.DefaultMaxRequestsInflight, "with --max-mutating-requests-inflight, the seats the priority levels share; with priority and fairness off, the most reads served at once, beyond which they are refused (429; 0: no limit)")
	fl.IntVar(&f.maxMutatingRequestsInflight, "max-mutating-requests-inflight", flowcontrol.DefaultMaxMutatingRequestsInflight, "with --max-requests-inflight, the seats the priority levels share; with priority and fairness off, the most writes served at once, beyond which they are refused (429; 0: no limit)")
	fl.BoolVar(&f.anonymousAuth, "anonymous-auth", true, "a request without credentials is system:anonymous, which the authorizer judges (off with AlwaysAllow, as upstream); when false only health and version answer such requests")
	fl.StringVar(&f.kubeletCA, "kubelet-certificate-authority", "", "CA bundle that kubelets' serving certificates are verified against (default: not verified, as upstream; DATA_DIR/tls/ca.crt verifies agents whose serving certificates the cluster CA issued, such as the bundled one)")
	fl.StringVar(&f.etcdCAFile, "etcd-cafile", "", "CA bundle the external etcd members' certificates are verified against")
	fl.StringVar(&f.etcdCertFile, "etcd-certfile", "", "client certificate presented to the external etcd (mutual TLS)")
	fl.StringVar(&f.etcdKeyFile, "etcd-keyfile", "", "key of --etcd-certfile")
	if withDisable {
		fl.StringSliceVar(&f.disable, "disable", nil, "bundled components not to run ("+strings.Join(controlplane.Components, ", ")+")")
	}
}

func (f *serverFlags) options() core.Options {
	return core.Options{
		DataDir: f.dataDir, BindAddress: f.bindAddress, SecurePort: f.securePort, AdvertiseAddress: f.advertise,
		EtcdServers: f.etcdServers, ServiceCIDR: f.serviceCIDR, Log: newLogger(f.verbose),
		OpenAPI: openAPIHandler, KubeletCertificateAuthority: f.kubeletCA,
		ServiceAccountSigningKeyFile: f.serviceAccountSigningKeyFile, ServiceAccountKeyFiles: f.serviceAccountKeyFiles,
		ServiceAccountIssuers:  f.serviceAccountIssuers,
		EnableAdmissionPlugins: f.enableAdmission, DisableAdmissionPlugins: f.disableAdmission, AuthorizationMode: f.authorizationMode,
		DisableAnonymousAuth:       !f.anonymousAuth,
		Profiling:                  f.profiling,
		DisablePriorityAndFairness: !f.priorityAndFairness,
		MaxRequestsInflight:        f.maxRequestsInflight, MaxMutatingRequestsInflight: f.maxMutatingRequestsInflight,
		EtcdCAFile: f.etcdCAFile, EtcdCertFile: f.etcdCertFile, EtcdKeyFile: f.etcdKeyFile,
		ClusterInit: f.clusterInit, EtcdClientPort: f.etcdClientPort, EtcdPeerPort: f.etcdPeerPort,
		ManageMemory: true,
	}
}

// startFlightRecorder starts the recorder --flight-recorder-window asks for, served
// with the profiles, which --profiling must therefore serve.
func (f *serverFlags) startFlightRecorder() (http.Handler, func(), error) {
	if f.flightRecorderWindow > 0 && !f.profiling {
		return nil, nil, fmt.Errorf("--flight-recorder-window needs --profiling: the window is served with the profiles")
	}
	return startFlightRecorder(f.flightRecorderWindow)
}

// join is --server and --token: the cluster of servers to join, if any.
func (f *serverFlags) join() (*core.JoinOptions, error) {
	if f.joinServer == "" && f.joinToken == "" {
		return nil, nil
	}
	if f.joinServer == "" || f.joinToken == "" {
		return nil, fmt.Errorf("--server and --token go together: a server joins a cluster with a server-role token (mizzen token create --role server)")
	}
	if f.clusterInit {
		return nil, fmt.Errorf("--cluster-init starts a new cluster; --server joins an existing one: give one of them")
	}
	tok, err := jointoken.Parse(f.joinToken)
	if err != nil {
		return nil, fmt.Errorf("--token: %w", err)
	}
	return &core.JoinOptions{Server: f.joinServer, Token: tok}, nil
}

func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a control plane: embedded etcd, apiserver, and the bundled components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if f.clusterReset || f.clusterResetRestorePath != "" {
				if !f.clusterReset {
					return fmt.Errorf("--cluster-reset-restore-path needs --cluster-reset")
				}
				if f.etcdServers != "" {
					return fmt.Errorf("--cluster-reset resets the embedded etcd; restore an external cluster with its own tools")
				}
				msg, err := controlplane.ClusterReset(ctx, f.dataDir, f.clusterResetRestorePath, newLogger(f.verbose))
				if err == nil {
					fmt.Fprintln(os.Stderr, msg)
				}
				return err
			}
			if f.removeMember != "" {
				msg, err := core.RemoveMember(ctx, datadir.Dir(f.dataDir), f.removeMember)
				if err == nil {
					fmt.Fprintln(os.Stderr, msg)
				}
				return err
			}
			if f.remove {
				msg, err := controlplane.RemoveServer(ctx, f.dataDir)
				if err == nil {
					fmt.Fprintln(os.Stderr, msg)
				}
				return err
			}
			join, err := f.join()
			if err != nil {
				return err
			}
			opts := f.options()
			opts.Join = join
			var stopRecorder func()
			if opts.FlightRecorder, stopRecorder, err = f.startFlightRecorder(); err != nil {
				return err
			}
			defer stopRecorder()
			return controlplane.RunBundle(ctx, controlplane.BundleOptions{
				Options: opts, Disable: f.disable, ClusterCIDR: f.clusterCIDR, PodBridge: f.podBridge,
				PodNetwork: f.podNetwork, VXLANID: f.vxlanID, VXLANPort: f.vxlanPort,
				KubeletPort: f.kubeletPort, NodeIP: f.nodeIP, ControllerManagerPort: f.controllerManagerPort,
				SchedulerPort: f.schedulerPort,
				Containerd:    f.containerd, PrivateRegistry: f.privateRegistry,
				IngressHTTPPort: f.ingressHTTPPort, IngressHTTPSPort: f.ingressHTTPSPort, MetricResolution: f.metricResolution, DashboardPort: f.dashboardPort,
				ProxyHealthzPort: f.proxyHealthzPort, ProxyMetricsAddress: f.proxyMetricsAddress,
				Snapshots: f.snapshots, CloudProvider: f.cloudProvider, KubeletCloudProvider: f.kubeletCloudProvider,
				Ready: func(cp *core.ControlPlane) {
					fmt.Fprintf(os.Stderr, "mizzen apiserver listening on %s; kubeconfig %s\n", cp.URL, cp.AdminKubeconfig)
				},
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&f.clusterCIDR, "cluster-cidr", "10.244.0.0/16", "CIDR that node pod CIDRs are allocated from")
	cmd.Flags().StringVar(&f.podBridge, "pod-bridge", "mizzen0", "the agent's pod network bridge (distinct per cluster when several share a host)")
	cmd.Flags().Int32Var(&f.kubeletPort, "kubelet-port", 10250, "the agent's kubelet port")
	cmd.Flags().StringVar(&f.nodeIP, "node-ip", "", "the agent's node InternalIP (default: the address of the interface to the default route)")
	cmd.Flags().StringVar(&f.podNetwork, "pod-network", "vxlan", "how the agent's pods reach the other nodes' pods: vxlan, host-gw or none (as `mizzen agent --pod-network`)")
	cmd.Flags().IntVar(&f.vxlanID, "vxlan-id", podnet.DefaultVNI, "the vxlan pod network's VNI")
	cmd.Flags().IntVar(&f.vxlanPort, "vxlan-port", podnet.DefaultPort, "the vxlan pod network's UDP port")
	cmd.Flags().StringVar(&f.snapshots.Schedule, "etcd-snapshot-schedule-cron", etcdsnapshot.DefaultSchedule, "when the embedded etcd is snapshotted, as a five-field cron spec")
	cmd.Flags().IntVar(&f.snapshots.Retention, "etcd-snapshot-retention", etcdsnapshot.DefaultRetention, "how many scheduled snapshots to keep")
	cmd.Flags().StringVar(&f.snapshots.Dir, "etcd-snapshot-dir", "", "directory of the scheduled snapshots (default DATA_DIR/db/snapshots)")
	cmd.Flags().BoolVar(&f.snapshots.Disable, "etcd-disable-snapshots", false, "take no scheduled snapshots")
	cmd.Flags().BoolVar(&f.clusterReset, "cluster-reset", false, "forget every other etcd member (or, with --cluster-reset-restore-path, restore a snapshot into a fresh single-member etcd), then exit")
	cmd.Flags().StringVar(&f.clusterResetRestorePath, "cluster-reset-restore-path", "", "snapshot file to restore with --cluster-reset")
	cmd.Flags().BoolVar(&f.clusterInit, "cluster-init", false, "start the first server of a cluster of servers: its embedded etcd member serves peers and other servers on the advertise address, with mutual TLS")
	cmd.Flags().StringVar(&f.joinServer, "server", "", "join the cluster of servers of this server (https://HOST:PORT), with --token")
	cmd.Flags().StringVar(&f.joinToken, "token", "", "server-role join token (mizzen token create --role server) for --server")
	cmd.Flags().IntVar(&f.etcdClientPort, "etcd-client-port", core.DefaultEtcdClientPort, "port of the embedded etcd's clients on the advertise address, in a cluster of servers")
	cmd.Flags().IntVar(&f.etcdPeerPort, "etcd-peer-port", core.DefaultEtcdPeerPort, "port of the embedded etcd's peers on the advertise address, in a cluster of servers")
	cmd.Flags().BoolVar(&f.remove, "remove", false, "take this (stopped) server out of its cluster of servers: the other etcd members forget it and its etcd data is moved aside; then exit")
	cmd.Flags().StringVar(&f.removeMember, "remove-member", "", "have the cluster of servers forget the etcd member of this name, a server gone for good; then exit")
	cmd.Flags().IntVar(&f.ingressHTTPPort, "ingress-http-port", 80, "port of the bundled Ingress controller's HTTP, on every address of the node (0: none)")
	cmd.Flags().IntVar(&f.ingressHTTPSPort, "ingress-https-port", 443, "port of the bundled Ingress controller's HTTPS, on every address of the node (0: none)")
	cmd.Flags().IntVar(&f.controllerManagerPort, "controller-manager-secure-port", 10257, "HTTPS port of the controller-manager's /healthz and /metrics, authorized by the apiserver (0 disables)")
	cmd.Flags().IntVar(&f.schedulerPort, "scheduler-secure-port", 10259, "HTTPS port of the scheduler's /healthz and /metrics, authorized by the apiserver (0 disables)")
	cmd.Flags().IntVar(&f.dashboardPort, "dashboard-port", 8443, "HTTPS port of the dashboard (web UI) on the bind address (0 disables it)")
	cmd.Flags().IntVar(&f.proxyHealthzPort, "proxy-healthz-port", agent.DefaultProxyHealthzPort, "port of the agent's service proxy's /healthz and /livez on every address (0: none); the dashboard reads it through the apiserver's node proxy")
	cmd.Flags().StringVar(&f.proxyMetricsAddress, "proxy-metrics-bind-address", agent.DefaultProxyMetricsAddress, "address of the agent's service proxy's /metrics and /proxyMode over plain HTTP (0.0.0.0:10249 for every IPv4 address; empty or 0: none)")
	addRuntimeFlags(cmd, &f.containerd, &f.privateRegistry)
	cmd.Flags().StringVar(&f.kubeletCloudProvider, "kubelet-cloud-provider", "", `the agent's kubelet --cloud-provider: "external" registers the node tainted uninitialized until the bundled cloud-controller-manager initializes it`)
	cmd.Flags().StringVar(&f.cloudProvider.LBPool, "lb-ip-pool", "", "the bundled cloud-controller-manager gives LoadBalancer Services addresses from this CIDR or range FIRST-LAST (default: the nodes' addresses, as k3s's ServiceLB)")
	cmd.Flags().StringVar(&f.cloudProvider.ConfigFile, "cloud-config", "", "the bundled cloud-controller-manager's local provider config (zone, region, instanceType, nodes.NAME...; see docs/cloud-controller-manager.md)")
	cmd.Flags().DurationVar(&f.metricResolution, "metric-resolution", metrics.DefaultResolution, "how often the bundled metrics server scrapes the kubelets")
	return cmd
}

// runControlPlane starts the control plane alone and waits for SIGINT or SIGTERM.
func runControlPlane(opts core.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := core.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mizzen apiserver listening on %s; kubeconfig %s\n", cp.URL, cp.AdminKubeconfig)
	<-cp.Done
	return cp.Err
}

package main

import (
	"fmt"
	"mizzen/internal/kubelet/containerd"
	"os"
	"os/signal"
	"syscall"

	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/agent"
	"mizzen/internal/kubelet/eviction"
)

func init() { register(newKubeletCommand) }

// newKubeletCommand runs the node agent against a CRI runtime.
func newKubeletCommand() *cobra.Command {
	var kubeconfig string
	var kf agent.KubeletOptions
	cmd := &cobra.Command{
		Use:   "kubelet",
		Short: "Run the node agent: register the node, run its pods through CRI",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			// Upstream's defaults apply only while --eviction-hard is not given.
			kf.Eviction.HardGiven = cmd.Flags().Changed("eviction-hard")
			return agent.RunKubelet(ctx, cfg, kf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the kubelet's credentials")
	f.StringVar(&kf.HostnameOverride, "hostname-override", "", "node name to register instead of the host name")
	f.StringVar(&kf.RuntimeEndpoint, "container-runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI runtime service endpoint")
	f.StringVar(&kf.ImageEndpoint, "image-service-endpoint", "", "CRI image service endpoint (default: the runtime endpoint)")
	f.StringVar(&kf.Taints, "register-with-taints", "", "taints to register the node with: key=value:Effect,...")
	f.StringVar(&kf.CloudProvider, "cloud-provider", "", `"external": register with the taint node.cloudprovider.kubernetes.io/uninitialized and leave the node's addresses to the cloud-controller-manager`)
	f.StringVar(&kf.NodeIP, "node-ip", "", "the node's InternalIP (default: the first global IPv4 address)")
	f.StringVar(&kf.RootDir, "root-dir", "/var/lib/kubelet", "kubelet state directory; its filesystem is reported as ephemeral-storage")
	f.StringVar(&kf.NodeLabels, "node-labels", "", "labels to register the node with: key=value,...")
	f.Int64Var(&kf.MaxPods, "max-pods", 110, "pods capacity of the node")
	f.StringSliceVar(&kf.ClusterDNS, "cluster-dns", nil, "DNS server IPs for pods with dnsPolicy ClusterFirst")
	f.StringSliceVar(&kf.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", nil, unsafeSysctlsUsage)
	f.StringVar(&kf.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	f.Int32Var(&kf.Port, "port", 10250, "port of the node server (logs, exec, attach, port-forward, stats), advertised in the node status")
	f.StringVar(&kf.Address, "address", "0.0.0.0", "IP address the node server listens on")
	f.StringVar(&kf.TLSCertFile, "tls-cert-file", "", "node server certificate (default: a self-signed one kept under --root-dir/pki)")
	f.StringVar(&kf.TLSKeyFile, "tls-private-key-file", "", "node server private key, with --tls-cert-file")
	f.StringVar(&kf.ClientCA, "client-ca-file", "", "CA bundle that callers' client certificates are verified against (without one every caller is refused)")
	f.StringVar(&kf.ContainerdDir, "containerd-data-dir", "", "supervise a containerd of our own with its state here (instead of --container-runtime-endpoint)")
	f.StringVar(&kf.PauseBinary, "pause-binary", "", "static pause binary for the sandbox image (with --containerd-data-dir; build ./internal/kubelet/containerd/pause with CGO_ENABLED=0)")
	f.StringVar(&kf.CNIBridge, "cni-bridge", "mizzen0", "the pod network's bridge (with --containerd-data-dir)")
	f.StringVar(&kf.ContainerdPath, "containerd", "", "the containerd binary to run (with --containerd-data-dir; default: containerd from PATH)")
	f.StringVar(&kf.PrivateRegistry, "private-registry", "", "registry mirrors and credentials in k3s's registries.yaml format (with --containerd-data-dir; default "+containerd.DefaultRegistriesFile+" if it exists)")
	f.StringVar(&kf.PodManifestPath, "pod-manifest-path", "", "directory of static pod manifests (YAML or JSON) to run on this node")
	f.StringVar(&kf.LocalPathDir, "local-path-dir", "", "directory for the local-path StorageClass's volumes on this node (empty: the node offers none)")
	addContainerLogFlags(cmd, &kf.ContainerLog)
	addEvictionFlags(cmd, &kf.Eviction)
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

// unsafeSysctlsUsage describes --allowed-unsafe-sysctls, upstream's kubelet flag.
const unsafeSysctlsUsage = "sysctls beyond the safe ones that pods may set, names or prefixes ending in '*' (e.g. kernel.msg*,net.core.somaxconn); each must be namespaced"

// addEvictionFlags binds upstream's --eviction-* flags to e.
func addEvictionFlags(cmd *cobra.Command, e *agent.EvictionOptions) {
	f := cmd.Flags()
	f.StringVar(&e.Hard, "eviction-hard", eviction.DefaultHard, "thresholds (signal<quantity or percentage, comma-separated) that evict pods at once when met; giving some leaves the others unset")
	f.StringVar(&e.Soft, "eviction-soft", "", "thresholds (e.g. memory.available<1.5Gi) that evict pods when met for their grace period")
	f.StringVar(&e.SoftGracePeriod, "eviction-soft-grace-period", "", "how long each soft threshold must stay met before pods are evicted (e.g. memory.available=1m30s)")
	f.Int64Var(&e.MaxPodGracePeriod, "eviction-max-pod-grace-period", 0, "most seconds a pod evicted for a soft threshold gets to stop; negative leaves the pod's own")
	f.DurationVar(&e.TransitionPeriod, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays True after its threshold was last met (0 means the default)")
	f.StringVar(&e.MinimumReclaim, "eviction-minimum-reclaim", "", "how much past each threshold is reclaimed once the kubelet acts (e.g. imagefs.available=2Gi)")
}

// addContainerLogFlags binds upstream's --container-log-* flags to c.
func addContainerLogFlags(cmd *cobra.Command, c *agent.ContainerLogOptions) {
	f := cmd.Flags()
	f.StringVar(&c.MaxSize, "container-log-max-size", "10Mi", "size a container's log file grows to before it is rotated (a quantity such as 10Mi)")
	f.IntVar(&c.MaxFiles, "container-log-max-files", 5, "most log files kept per container, the current one included; at least 2")
	f.IntVar(&c.MaxWorkers, "container-log-max-workers", 1, "how many containers' logs are rotated at once")
	f.DurationVar(&c.MonitorInterval, "container-log-monitor-interval", 10*time.Second, "how often container logs are checked for rotation")
}

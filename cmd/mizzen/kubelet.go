package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/eviction"
	"mizzen/internal/kubelet/logrotate"
	"mizzen/internal/kubelet/podcgroups"
	nodeserver "mizzen/internal/kubelet/server"
)

func init() { register(newKubeletCommand) }

// newKubeletCommand runs the node agent against a CRI runtime.
func newKubeletCommand() *cobra.Command {
	var kubeconfig string
	var kf kubeletFlags
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
			kf.eviction.hardGiven = cmd.Flags().Changed("eviction-hard")
			return runKubelet(ctx, cfg, kf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the kubelet's credentials")
	f.StringVar(&kf.hostnameOverride, "hostname-override", "", "node name to register instead of the host name")
	f.StringVar(&kf.runtimeEndpoint, "container-runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI runtime service endpoint")
	f.StringVar(&kf.imageEndpoint, "image-service-endpoint", "", "CRI image service endpoint (default: the runtime endpoint)")
	f.StringVar(&kf.taints, "register-with-taints", "", "taints to register the node with: key=value:Effect,...")
	f.StringVar(&kf.nodeIP, "node-ip", "", "the node's InternalIP (default: the first global IPv4 address)")
	f.StringVar(&kf.rootDir, "root-dir", "/var/lib/kubelet", "kubelet state directory; its filesystem is reported as ephemeral-storage")
	f.StringVar(&kf.nodeLabels, "node-labels", "", "labels to register the node with: key=value,...")
	f.Int64Var(&kf.maxPods, "max-pods", 110, "pods capacity of the node")
	f.StringSliceVar(&kf.clusterDNS, "cluster-dns", nil, "DNS server IPs for pods with dnsPolicy ClusterFirst")
	f.StringVar(&kf.clusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	f.Int32Var(&kf.port, "port", 10250, "port of the node server (logs, exec, attach, port-forward, stats), advertised in the node status")
	f.StringVar(&kf.address, "address", "0.0.0.0", "IP address the node server listens on")
	f.StringVar(&kf.tlsCertFile, "tls-cert-file", "", "node server certificate (default: a self-signed one kept under --root-dir/pki)")
	f.StringVar(&kf.tlsKeyFile, "tls-private-key-file", "", "node server private key, with --tls-cert-file")
	f.StringVar(&kf.clientCAFile, "client-ca-file", "", "CA bundle that callers' client certificates are verified against (without one every caller is refused)")
	f.StringVar(&kf.containerdDir, "containerd-data-dir", "", "supervise a containerd of our own with its state here (instead of --container-runtime-endpoint)")
	f.StringVar(&kf.pauseBinary, "pause-binary", "", "static pause binary for the sandbox image (with --containerd-data-dir; build ./internal/kubelet/containerd/pause with CGO_ENABLED=0)")
	f.StringVar(&kf.cniBridge, "cni-bridge", "mizzen0", "the pod network's bridge (with --containerd-data-dir)")
	f.StringVar(&kf.podManifestPath, "pod-manifest-path", "", "directory of static pod manifests (YAML or JSON) to run on this node")
	f.StringVar(&kf.localPathDir, "local-path-dir", "", "directory for the local-path StorageClass's volumes on this node (empty: the node offers none)")
	kf.containerLog.addFlags(cmd)
	kf.eviction.addFlags(cmd)
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

// kubeletFlags are the kubelet's settings, shared by `mizzen kubelet` and the agent in
// `mizzen server`.
type kubeletFlags struct {
	hostnameOverride, runtimeEndpoint, imageEndpoint   string
	taints, nodeIP, rootDir, nodeLabels, clusterDomain string
	containerdDir, pauseBinary, cniBridge              string
	address, tlsCertFile, tlsKeyFile, clientCAFile     string
	// imagesDir holds image tarballs imported into the runtime at start (the agent's).
	imagesDir       string
	podManifestPath string
	localPathDir    string
	clusterDNS      []string
	maxPods         int64
	port            int32
	containerLog    containerLogFlags
	eviction        evictionFlags
}

// evictionFlags are upstream's node-pressure eviction settings (--eviction-*). The
// zero value, as the agent in `mizzen server` has it, means upstream's defaults.
type evictionFlags struct {
	hard, soft, softGracePeriod, minimumReclaim string
	// hardGiven is set when --eviction-hard was given, even empty: then only its
	// thresholds apply, as upstream.
	hardGiven         bool
	maxPodGracePeriod int64
	transitionPeriod  time.Duration
}

func (e *evictionFlags) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.hard, "eviction-hard", eviction.DefaultHard, "thresholds (signal<quantity or percentage, comma-separated) that evict pods at once when met; giving some leaves the others unset")
	f.StringVar(&e.soft, "eviction-soft", "", "thresholds (e.g. memory.available<1.5Gi) that evict pods when met for their grace period")
	f.StringVar(&e.softGracePeriod, "eviction-soft-grace-period", "", "how long each soft threshold must stay met before pods are evicted (e.g. memory.available=1m30s)")
	f.Int64Var(&e.maxPodGracePeriod, "eviction-max-pod-grace-period", 0, "most seconds a pod evicted for a soft threshold gets to stop; negative leaves the pod's own")
	f.DurationVar(&e.transitionPeriod, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays True after its threshold was last met (0 means the default)")
	f.StringVar(&e.minimumReclaim, "eviction-minimum-reclaim", "", "how much past each threshold is reclaimed once the kubelet acts (e.g. imagefs.available=2Gi)")
}

// nodePressure parses the flags into the kubelet's node-pressure eviction settings.
func (e *evictionFlags) nodePressure() (*kubelet.NodePressure, error) {
	hard := e.hard
	if !e.hardGiven {
		hard = eviction.DefaultHard
	}
	thresholds, err := eviction.ParseThresholds(eviction.ThresholdFlags{
		Hard: hard, Soft: e.soft, SoftGracePeriod: e.softGracePeriod, MinimumReclaim: e.minimumReclaim,
	})
	if err != nil {
		return nil, err
	}
	if e.transitionPeriod < 0 {
		return nil, fmt.Errorf("--eviction-pressure-transition-period must not be negative: %v", e.transitionPeriod)
	}
	return &kubelet.NodePressure{
		Thresholds: thresholds, MaxPodGracePeriodSeconds: e.maxPodGracePeriod, TransitionPeriod: e.transitionPeriod,
	}, nil
}

// containerLogFlags are upstream's --container-log-* settings, of `mizzen kubelet` and
// `mizzen agent`; zero values mean the kubelet's defaults.
type containerLogFlags struct {
	maxSize              string
	maxFiles, maxWorkers int
	monitorInterval      time.Duration
}

func (c *containerLogFlags) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.maxSize, "container-log-max-size", "10Mi", "size a container's log file grows to before it is rotated (a quantity such as 10Mi)")
	f.IntVar(&c.maxFiles, "container-log-max-files", 5, "most log files kept per container, the current one included; at least 2")
	f.IntVar(&c.maxWorkers, "container-log-max-workers", 1, "how many containers' logs are rotated at once")
	f.DurationVar(&c.monitorInterval, "container-log-monitor-interval", 10*time.Second, "how often container logs are checked for rotation")
}

// runKubelet starts the runtime (its own containerd when containerdDir is set) and runs
// the kubelet until ctx ends.
func runKubelet(ctx context.Context, cfg *rest.Config, kf kubeletFlags) error {
	// Bad flags fail before anything starts.
	pressure, err := kf.eviction.nodePressure()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubelet/mizzen" // managedFields name the manager by the part before "/", as upstream's "kubelet"
	if cfg.QPS == 0 {
		// client-go's own default (5/s) would make status writes the bottleneck of
		// pod startup; upstream's kubelet defaults to 50/s with a burst of 100.
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.ContentType == "" {
		// Upstream's kubelet talks protobuf (its contentType default): pod status writes
		// and the pod watch cost the kubelet and the apiserver less than in JSON.
		cfg.ContentType = runtime.ContentTypeProtobuf
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	name := kf.hostnameOverride
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return err
		}
	}
	name = strings.ToLower(strings.TrimSpace(name)) // node names are lower case, as upstream
	parsedTaints, err := kubelet.ParseTaints(kf.taints)
	if err != nil {
		return err
	}
	labels, err := kubelet.ParseLabels(kf.nodeLabels)
	if err != nil {
		return err
	}
	runtimeEndpoint, imageEndpoint := kf.runtimeEndpoint, kf.imageEndpoint
	var podCIDRChanged func(string)
	if kf.containerdDir != "" {
		pause, err := os.ReadFile(kf.pauseBinary)
		if err != nil {
			return fmt.Errorf("--pause-binary: %w", err)
		}
		rtOpts := containerd.Options{DataDir: kf.containerdDir, Bridge: kf.cniBridge}
		stopped, err := containerd.Start(ctx, rtOpts, nil, pause)
		if err != nil {
			return err
		}
		defer func() { <-stopped }()
		runtimeEndpoint, imageEndpoint = rtOpts.Endpoint(), ""
		if kf.imagesDir != "" {
			imported, err := containerd.ImportArchivesIn(ctx, rtOpts, kf.imagesDir)
			if err != nil {
				return fmt.Errorf("importing images from %s: %w", kf.imagesDir, err)
			}
			if len(imported) > 0 {
				slog.Info("imported images", "files", imported)
			}
		}
		podCIDRChanged = func(cidr string) {
			if err := rtOpts.WriteCNIConfig(cidr); err != nil {
				slog.Error("writing CNI configuration", "err", err)
			}
		}
	}
	cert, err := nodeserver.LoadCertificate(kf.tlsCertFile, kf.tlsKeyFile, filepath.Join(kf.rootDir, "pki"), name)
	if err != nil {
		return fmt.Errorf("node server certificate: %w", err)
	}
	clientCAs, err := nodeserver.LoadClientCAs(kf.clientCAFile)
	if err != nil {
		return err
	}
	address := kf.address
	if address == "" {
		address = "0.0.0.0"
	}
	rs, is, err := kubelet.ConnectRuntime(ctx, runtimeEndpoint, imageEndpoint)
	if err != nil {
		return err
	}
	defer rs.Close(ctx)
	var logMaxSize int64
	if kf.containerLog.maxSize != "" {
		if logMaxSize, err = logrotate.ParseMaxSize(kf.containerLog.maxSize); err != nil {
			return fmt.Errorf("--container-log-max-size: %w", err)
		}
	}
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("finding the cgroup hierarchies: %w", err)
	}
	return kubelet.Run(ctx, kubelet.Options{
		PodCgroups:         cgroups,
		PodCIDRChanged:     podCIDRChanged,
		Client:             client,
		NodeName:           name,
		Hostname:           name,
		Runtime:            rs,
		Images:             is,
		NodeIP:             kf.nodeIP,
		NodeLabels:         labels,
		RegisterWithTaints: parsedTaints,
		MaxPods:            kf.maxPods,
		ClusterDNS:         kf.clusterDNS,
		ClusterDomain:      kf.clusterDomain,
		Port:               kf.port,
		RootDir:            kf.rootDir,
		PodManifestPath:    kf.podManifestPath,
		LocalPathDir:       kf.localPathDir,

		ContainerLogMaxSize:         logMaxSize,
		ContainerLogMaxFiles:        kf.containerLog.maxFiles,
		ContainerLogMaxWorkers:      kf.containerLog.maxWorkers,
		ContainerLogMonitorInterval: kf.containerLog.monitorInterval,
		NodePressure:                pressure,

		NodeServer: &nodeserver.Options{
			Address:     net.JoinHostPort(address, strconv.Itoa(int(kf.port))),
			Certificate: cert, ClientCAs: clientCAs,
		},
	})
}

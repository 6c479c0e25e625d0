package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/eviction"
	"mizzen/internal/kubelet/logrotate"
	"mizzen/internal/kubelet/podcgroups"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/kubelet/volume"
)

// KubeletOptions are the kubelet's settings, filled by `mizzen kubelet`'s flags or by
// an agent's defaults (AgentKubelet).
type KubeletOptions struct {
	HostnameOverride, RuntimeEndpoint, ImageEndpoint   string
	Taints, NodeIP, RootDir, NodeLabels, ClusterDomain string
	// CloudProvider is --cloud-provider: "" or "external" (the node waits for the
	// cloud-controller-manager to initialize it).
	CloudProvider string
	// ContainerdDir, when set, runs and supervises a containerd of the kubelet's own
	// with its state there, its sandbox image built from PauseBinary and its pods on
	// the bridge CNIBridge; RuntimeEndpoint is then ignored.
	ContainerdDir, PauseBinary, CNIBridge string
	// ContainerdPath is the containerd binary to run there (containerd from PATH when
	// empty); its ctr beside it, if any, imports images. PrivateRegistry is a k3s-style
	// registries.yaml of mirrors and registry credentials for it
	// (containerd.DefaultRegistriesFile, if present, when empty).
	ContainerdPath, PrivateRegistry string
	// ClusterCIDR (every node's pods) is exempt from the pods' masquerading, and PodMTU
	// is their interfaces' MTU (0: the CNI plugin's default).
	ClusterCIDR                                string
	PodMTU                                     int
	Address, TLSCertFile, TLSKeyFile, ClientCA string
	// ServingCertificate, when set, is the node server's rotating certificate (a
	// joined node's, from the kubelet-serving signer) in place of TLSCertFile.
	ServingCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ImagesDir holds image tarballs imported into the runtime at start (the agent's).
	ImagesDir       string
	PodManifestPath string
	// LocalPathDir holds the local-path StorageClass's volumes on this node; empty
	// offers none.
	LocalPathDir string
	ClusterDNS   []string
	// AllowedUnsafeSysctls are the sysctls beyond the safe ones pods may set.
	AllowedUnsafeSysctls []string
	MaxPods              int64
	Port                 int32
	ContainerLog         ContainerLogOptions
	Eviction             EvictionOptions
}

// EvictionOptions are upstream's node-pressure eviction settings (--eviction-*).
type EvictionOptions struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim string
	// HardGiven is set when --eviction-hard was given, even empty: then only its
	// thresholds apply, as upstream; otherwise upstream's defaults do.
	HardGiven         bool
	MaxPodGracePeriod int64
	TransitionPeriod  time.Duration
}

// ContainerLogOptions are upstream's --container-log-* settings; zero values mean the
// kubelet's defaults.
type ContainerLogOptions struct {
	MaxSize              string
	MaxFiles, MaxWorkers int
	MonitorInterval      time.Duration
}

// nodePressure parses the options into the kubelet's node-pressure eviction settings.
func (e EvictionOptions) nodePressure() (*kubelet.NodePressure, error) {
	hard := e.Hard
	if !e.HardGiven {
		hard = eviction.DefaultHard
	}
	thresholds, err := eviction.ParseThresholds(eviction.ThresholdFlags{
		Hard: hard, Soft: e.Soft, SoftGracePeriod: e.SoftGracePeriod, MinimumReclaim: e.MinimumReclaim,
	})
	if err != nil {
		return nil, err
	}
	if e.TransitionPeriod < 0 {
		return nil, fmt.Errorf("--eviction-pressure-transition-period must not be negative: %v", e.TransitionPeriod)
	}
	return &kubelet.NodePressure{
		Thresholds: thresholds, MaxPodGracePeriodSeconds: e.MaxPodGracePeriod, TransitionPeriod: e.TransitionPeriod,
	}, nil
}

// RunKubelet starts the runtime (its own containerd when ContainerdDir is set) and runs
// the kubelet until ctx ends.
func RunKubelet(ctx context.Context, cfg *rest.Config, kf KubeletOptions) error {
	// Bad settings fail before anything starts.
	pressure, err := kf.Eviction.nodePressure()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubelet/mizzen" // managedFields name the manager by the part before "/", as upstream's "kubelet"
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = kubelet.DefaultAPIQPS, kubelet.DefaultAPIBurst
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
	name := kf.HostnameOverride
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return err
		}
	}
	name = strings.ToLower(strings.TrimSpace(name)) // node names are lower case, as upstream
	if kf.CloudProvider != "" && kf.CloudProvider != "external" {
		return fmt.Errorf("--cloud-provider %q: only \"external\" (a cloud-controller-manager initializes the node) or none", kf.CloudProvider)
	}
	parsedTaints, err := kubelet.ParseTaints(kf.Taints)
	if err != nil {
		return err
	}
	labels, err := kubelet.ParseLabels(kf.NodeLabels)
	if err != nil {
		return err
	}
	runtimeEndpoint, imageEndpoint := kf.RuntimeEndpoint, kf.ImageEndpoint
	var podCIDRChanged func(string)
	if kf.ContainerdDir != "" {
		pause, err := os.ReadFile(kf.PauseBinary)
		if err != nil {
			return fmt.Errorf("--pause-binary: %w", err)
		}
		registriesFile := kf.PrivateRegistry
		if registriesFile == "" {
			registriesFile = containerd.DefaultRegistriesFile
		}
		registries, err := containerd.LoadRegistries(registriesFile)
		if err != nil {
			return err
		}
		rtOpts := containerd.Options{DataDir: kf.ContainerdDir, Bridge: kf.CNIBridge, ClusterCIDR: kf.ClusterCIDR, MTU: kf.PodMTU,
			ContainerdPath: kf.ContainerdPath, Registries: registries}
		// Each start-up step is logged with its duration: a kubelet that never posts
		// node status then shows where it waits (containerd.log says why containerd does).
		started := time.Now()
		slog.Info("starting containerd", "dir", kf.ContainerdDir)
		// containerd runs until the kubelet returns, also when it returns early with an
		// error: waiting for it on ctx alone would hang a failed start silently.
		runtimeCtx, stopRuntime := context.WithCancel(ctx)
		stopped, err := containerd.Start(runtimeCtx, rtOpts, nil, pause)
		defer func() { stopRuntime(); <-stopped }()
		if err != nil {
			return err
		}
		slog.Info("containerd ready", "took", time.Since(started).Round(time.Millisecond))
		runtimeEndpoint, imageEndpoint = rtOpts.Endpoint(), ""
		if kf.ImagesDir != "" {
			imported, err := containerd.ImportArchivesIn(ctx, rtOpts, kf.ImagesDir)
			if err != nil {
				return fmt.Errorf("importing images from %s: %w", kf.ImagesDir, err)
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
	var cert tls.Certificate
	if kf.ServingCertificate == nil {
		if cert, err = nodeserver.LoadCertificate(kf.TLSCertFile, kf.TLSKeyFile, filepath.Join(kf.RootDir, "pki"), name); err != nil {
			return fmt.Errorf("node server certificate: %w", err)
		}
	}
	clientCAs, err := nodeserver.LoadClientCAs(kf.ClientCA)
	if err != nil {
		return err
	}
	address := kf.Address
	if address == "" {
		address = "0.0.0.0"
	}
	connecting := time.Now()
	rs, is, err := kubelet.ConnectRuntime(ctx, runtimeEndpoint, imageEndpoint)
	if err != nil {
		return err
	}
	slog.Info("connected to the container runtime", "endpoint", runtimeEndpoint, "took", time.Since(connecting).Round(time.Millisecond))
	defer rs.Close(ctx)
	var logMaxSize int64
	if kf.ContainerLog.MaxSize != "" {
		if logMaxSize, err = logrotate.ParseMaxSize(kf.ContainerLog.MaxSize); err != nil {
			return fmt.Errorf("--container-log-max-size: %w", err)
		}
	}
	if err := volume.MakeRShared(kf.RootDir); err != nil {
		return fmt.Errorf("the kubelet's root directory: %w", err)
	}
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("finding the cgroup hierarchies: %w", err)
	}
	return kubelet.Run(ctx, kubelet.Options{
		PodCgroups:            cgroups,
		PodCIDRChanged:        podCIDRChanged,
		Client:                client,
		NodeName:              name,
		Hostname:              name,
		Runtime:               rs,
		Images:                is,
		NodeIP:                kf.NodeIP,
		NodeLabels:            labels,
		RegisterWithTaints:    parsedTaints,
		ExternalCloudProvider: kf.CloudProvider == "external",
		MaxPods:               kf.MaxPods,
		ClusterDNS:            kf.ClusterDNS,
		AllowedUnsafeSysctls:  kf.AllowedUnsafeSysctls,
		ClusterDomain:         kf.ClusterDomain,
		Port:                  kf.Port,
		RootDir:               kf.RootDir,
		PodManifestPath:       kf.PodManifestPath,
		LocalPathDir:          kf.LocalPathDir,

		ContainerLogMaxSize:         logMaxSize,
		ContainerLogMaxFiles:        kf.ContainerLog.MaxFiles,
		ContainerLogMaxWorkers:      kf.ContainerLog.MaxWorkers,
		ContainerLogMonitorInterval: kf.ContainerLog.MonitorInterval,
		NodePressure:                pressure,

		NodeServer: &nodeserver.Options{
			Address:     net.JoinHostPort(address, strconv.Itoa(int(kf.Port))),
			Certificate: cert, GetCertificate: kf.ServingCertificate, ClientCAs: clientCAs,
		},
	})
}

// Package agent runs a node: the kubelet with a containerd of its own under the data
// directory, and the service proxy, as `mizzen agent` runs them and as `mizzen server`
// runs them beside the control plane. Each reaches the apiserver only through its own
// credentials.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"mizzen/internal/datadir"
	"mizzen/internal/hostaddr"
	"mizzen/internal/podnet"
	"mizzen/internal/proxy"
)

// Options are an agent's: the node's kubelet and, unless Proxy is nil, its proxy.
type Options struct {
	Kubelet       KubeletOptions
	KubeletConfig *rest.Config
	// Proxy, when set, runs the service proxy with ProxyConfig's credentials.
	Proxy       *ProxyOptions
	ProxyConfig *rest.Config
	// Joined, when set, keeps a joined node's certificates current beside them.
	Joined *Joined
	// PodNetwork, when set, connects the node's pods with the other nodes' (with the
	// kubelet's credentials).
	PodNetwork *PodNetworkOptions
	// NetworkPolicy, when set, enforces NetworkPolicies with NetworkPolicyConfig's
	// credentials (which may list pods, namespaces and policies).
	NetworkPolicy       *NetworkPolicyOptions
	NetworkPolicyConfig *rest.Config
}

// Run runs the agent's components until ctx ends or one of them fails, which stops
// the others; the error is the first failure's.
func Run(ctx context.Context, opts Options) error {
	components := []func(context.Context) error{
		func(ctx context.Context) error { return RunKubelet(ctx, opts.KubeletConfig, opts.Kubelet) },
	}
	if opts.Proxy != nil {
		components = append(components, func(ctx context.Context) error { return RunProxy(ctx, opts.ProxyConfig, *opts.Proxy) })
	}
	if opts.Joined != nil {
		components = append(components, opts.Joined.Run)
	}
	if opts.PodNetwork != nil {
		components = append(components, func(ctx context.Context) error {
			return RunPodNetwork(ctx, opts.KubeletConfig, opts.Kubelet.HostnameOverride, *opts.PodNetwork)
		})
	}
	if opts.NetworkPolicy != nil {
		components = append(components, func(ctx context.Context) error {
			return RunNetworkPolicy(ctx, opts.NetworkPolicyConfig, opts.Kubelet.HostnameOverride, *opts.NetworkPolicy)
		})
	}
	return runAll(ctx, components...)
}

// runAll runs components until ctx ends or one of them fails, which stops the others.
func runAll(ctx context.Context, components ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(components))
	for _, run := range components {
		go func() { errs <- run(ctx) }()
	}
	var first error
	for range components {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// EvictionHard are an agent's hard eviction thresholds: k3s's, lower on disk than
// upstream's kubelet defaults (10% and 15%), since an agent shares its disk with
// everything else on a developer's machine and upstream's would refuse every pod there
// long before the disk is full.
const EvictionHard = "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%"

// PauseBinaryName is the sandbox program an agent expects beside the mizzen binary.
const PauseBinaryName = "mizzen-pause"

// AgentKubelet are the kubelet settings of an agent, bundled or not: everything lives
// under the data directory's agent/, the runtime is a containerd of its own, and the
// sandbox program sits beside the mizzen binary. An empty nodeName means the host name.
func AgentKubelet(dir datadir.Dir, nodeName string, port int32, bridge string) (KubeletOptions, error) {
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return KubeletOptions{}, err
		}
		nodeName = host
	}
	exe, err := os.Executable()
	if err != nil {
		return KubeletOptions{}, err
	}
	kf := KubeletOptions{
		HostnameOverride: strings.ToLower(nodeName),
		RootDir:          dir.Kubelet(),
		ContainerdDir:    dir.Containerd(),
		ImagesDir:        dir.Images(),
		PodManifestPath:  dir.PodManifests(),
		LocalPathDir:     dir.Storage(),
		PauseBinary:      filepath.Join(filepath.Dir(exe), PauseBinaryName),
		ClusterDomain:    "cluster.local", MaxPods: 110, Port: port, CNIBridge: bridge,
		Eviction: EvictionOptions{Hard: EvictionHard, HardGiven: true},
	}
	if _, err := os.Stat(kf.PauseBinary); err != nil {
		return KubeletOptions{}, fmt.Errorf("agent: the sandbox (pause) program %s is missing: `make build` builds it", kf.PauseBinary)
	}
	return kf, nil
}

// WithExternalCloudProvider runs the kubelet with --cloud-provider external and, as
// k3s's agent does, with this machine's primary address as its --node-ip unless one is
// given, so that the cloud-controller-manager learns the node's address from the
// kubelet's alpha.kubernetes.io/provided-node-ip annotation.
func WithExternalCloudProvider(kf *KubeletOptions) error {
	kf.CloudProvider = "external"
	if kf.NodeIP != "" {
		return nil
	}
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return fmt.Errorf("--cloud-provider external: finding the node IP: %w; pass --node-ip", err)
	}
	kf.NodeIP = ip.String()
	return nil
}

// ClusterCAFile returns a file holding the cluster CA of the kubeconfig, which in a
// mizzen cluster also signs the apiserver's client certificate for kubelets: the CA file
// it names, or its inline data written under rootDir.
func ClusterCAFile(tls rest.TLSClientConfig, rootDir string) (string, error) {
	if tls.CAFile != "" {
		return tls.CAFile, nil
	}
	if len(tls.CAData) == 0 {
		return "", errors.New("the kubeconfig names no cluster CA: pass --client-ca-file, or the node server refuses every caller")
	}
	path := filepath.Join(rootDir, "pki", "cluster-ca.crt")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, tls.CAData, 0o644)
}

// PodNetworkFor are the pod network settings of an agent whose pods are on bridge
// within clusterCIDR; nil for --pod-network none. It also gives the kubelet the cluster
// CIDR (exempt from masquerading) and the pods' MTU.
func PodNetworkFor(kf *KubeletOptions, mode, clusterCIDR, bridge string, vni, port int, log *slog.Logger) (*PodNetworkOptions, error) {
	m, err := podnet.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	kf.ClusterCIDR, kf.PodMTU = clusterCIDR, podnet.PodMTU(m)
	if m == podnet.None {
		return nil, nil
	}
	if clusterCIDR == "" {
		return nil, fmt.Errorf("--pod-network %s needs --cluster-cidr", m)
	}
	return &PodNetworkOptions{Mode: m, ClusterCIDR: clusterCIDR, Bridge: bridge, VNI: vni, Port: port, Log: log}, nil
}

// DefaultProxyHealthzPort is upstream's kube-proxy health port.
const DefaultProxyHealthzPort = 10256

// DefaultProxyMetricsAddress is upstream's kube-proxy --metrics-bind-address: the
// metrics port on loopback only.
const DefaultProxyMetricsAddress = "127.0.0.1:10249"

// ProxyHealthzAddress is where a proxy serves its health checks on every address of the
// node, given its port; 0 serves none.
func ProxyHealthzAddress(port int) string {
	if port <= 0 {
		return ""
	}
	return net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
}

// ProxyFor are the proxy settings of an agent whose node is nodeName on bridge.
func ProxyFor(nodeName, clusterCIDR, bridge string, log *slog.Logger) ProxyOptions {
	return ProxyOptions{HostnameOverride: nodeName, ClusterCIDR: clusterCIDR, Table: proxy.TableNameFor(bridge), Log: log}
}

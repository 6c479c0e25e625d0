package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/proxy"
)

func init() { register(newAgentCommand) }

// newAgentCommand runs a node's agent bundle: the kubelet with a containerd of its own
// under the data directory, and the service proxy, as `mizzen server` runs them beside
// the control plane.
func newAgentCommand() *cobra.Command {
	var kubeconfig, proxyKubeconfig, dataDir, nodeName, podBridge, clientCAFile, localPathDir string
	var pf proxyFlags
	var noProxy, verbose bool
	var kubeletPort int32
	var containerLog containerLogFlags
	var clusterDNS []string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node: the kubelet with its own containerd and the service proxy, joining the cluster of --kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			kf, err := agentKubeletFlags(dataDir, nodeName, kubeletPort, podBridge)
			if err != nil {
				return err
			}
			kf.containerLog = containerLog
			kf.clusterDNS = clusterDNS
			if localPathDir != "" {
				kf.localPathDir = localPathDir
			}
			if kf.clientCAFile = clientCAFile; clientCAFile == "" {
				if kf.clientCAFile, err = clusterCAFile(cfg.TLSClientConfig, kf.rootDir); err != nil {
					return err
				}
			}
			if noProxy {
				return runKubelet(ctx, cfg, kf)
			}
			proxyCfg := cfg
			if proxyKubeconfig != "" {
				if proxyCfg, err = clientcmd.BuildConfigFromFlags("", proxyKubeconfig); err != nil {
					return fmt.Errorf("loading the proxy's kubeconfig: %w", err)
				}
			}
			pf.hostnameOverride, pf.table = kf.hostnameOverride, proxy.TableNameFor(podBridge)
			return runNode(ctx, func(ctx context.Context) error { return runKubelet(ctx, cfg, kf) },
				func(ctx context.Context) error { return runProxy(ctx, proxyCfg, pf, newLogger(verbose)) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials")
	f.StringVar(&dataDir, "data-dir", defaultDataDir, "directory for the node's state (DATA_DIR/agent: containerd, kubelet, images, pod-manifests; DATA_DIR/storage: local-path volumes)")
	f.StringVar(&nodeName, "node-name", "", "node name to register (default: the host name)")
	f.StringVar(&localPathDir, "local-path-dir", "", "directory for the local-path StorageClass's volumes on this node (default DATA_DIR/storage)")
	f.StringVar(&podBridge, "pod-bridge", "mizzen0", "the pod network bridge (distinct per node when several share a host)")
	f.Int32Var(&kubeletPort, "kubelet-port", 10250, "the kubelet's port")
	f.StringVar(&clientCAFile, "client-ca-file", "", "CA bundle the node server verifies callers (the apiserver) against (default: the cluster CA of --kubeconfig)")
	f.StringVar(&proxyKubeconfig, "proxy-kubeconfig", "", "kubeconfig of the service proxy, upstream's system:kube-proxy (default: --kubeconfig)")
	f.StringVar(&pf.clusterCIDR, "cluster-cidr", "", "the pods' CIDR, for the proxy: traffic to a ClusterIP from outside it is masqueraded")
	f.StringSliceVar(&pf.nodePortAddresses, "nodeport-addresses", nil, "the proxy's NodePort addresses: CIDRs, or \"primary\" (default: primary)")
	f.BoolVar(&pf.masqueradeAll, "masquerade-all", false, "the proxy masquerades all traffic sent to a ClusterIP")
	f.BoolVar(&noProxy, "disable-proxy", false, "run no service proxy")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the proxy's debug messages")
	f.StringSliceVar(&clusterDNS, "cluster-dns", nil, "DNS server IPs for pods with dnsPolicy ClusterFirst (mizzen server's is the 10th address of its service CIDR, 10.96.0.10 by default)")
	containerLog.addFlags(cmd)
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

// agentEvictionHard are the bundled node's hard eviction thresholds: k3s's, lower on
// disk than upstream's kubelet defaults (10% and 15%), since an agent shares its disk
// with everything else on a developer's machine and upstream's would refuse every pod
// there long before the disk is full.
const agentEvictionHard = "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%"

// runNode runs a node's components until ctx ends or one of them fails, which stops
// the others; the error is the first failure's.
func runNode(ctx context.Context, components ...func(context.Context) error) error {
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

// agentKubeletFlags are the kubelet settings of an agent, bundled or not: everything
// lives under DATA_DIR/agent, the runtime is a containerd of its own, and the sandbox
// program sits beside the mizzen binary. An empty nodeName means the host name.
func agentKubeletFlags(dataDir, nodeName string, port int32, bridge string) (kubeletFlags, error) {
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return kubeletFlags{}, err
		}
		nodeName = host
	}
	exe, err := os.Executable()
	if err != nil {
		return kubeletFlags{}, err
	}
	agentDir := filepath.Join(dataDir, "agent")
	kf := kubeletFlags{
		hostnameOverride: strings.ToLower(nodeName),
		rootDir:          filepath.Join(agentDir, "kubelet"),
		containerdDir:    filepath.Join(agentDir, "containerd"),
		imagesDir:        filepath.Join(agentDir, "images"),
		podManifestPath:  filepath.Join(agentDir, "pod-manifests"),
		localPathDir:     filepath.Join(dataDir, "storage"),
		pauseBinary:      filepath.Join(filepath.Dir(exe), "mizzen-pause"),
		clusterDomain:    "cluster.local", maxPods: 110, port: port, cniBridge: bridge,
		eviction: evictionFlags{hard: agentEvictionHard, hardGiven: true},
	}
	if _, err := os.Stat(kf.pauseBinary); err != nil {
		return kubeletFlags{}, fmt.Errorf("agent: the sandbox (pause) program %s is missing: `make build` builds it", kf.pauseBinary)
	}
	return kf, nil
}

// clusterCAFile returns a file holding the cluster CA of the kubeconfig, which in a
// mizzen cluster also signs the apiserver's client certificate for kubelets: the CA file
// it names, or its inline data written under rootDir.
func clusterCAFile(tls rest.TLSClientConfig, rootDir string) (string, error) {
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

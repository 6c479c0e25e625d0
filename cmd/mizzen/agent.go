package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/agent"
	"mizzen/internal/datadir"
	"mizzen/internal/netpol"
	"mizzen/internal/podnet"
)

func init() { register(newAgentCommand) }

// newAgentCommand runs a node's agent bundle: the kubelet with a containerd of its own
// under the data directory, and the service proxy, as `mizzen server` runs them beside
// the control plane.
func newAgentCommand() *cobra.Command {
	var kubeconfig, proxyKubeconfig, dataDir, nodeName, podBridge, clientCAFile, clusterCIDR, localPathDir, nodeIP, podNetwork string
	var vxlanID, vxlanPort int
	var pf agent.ProxyOptions
	var noProxy, noNetworkPolicy, verbose bool
	var kubeletPort int32
	var containerLog agent.ContainerLogOptions
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
			kf, err := agent.AgentKubelet(datadir.Dir(dataDir), nodeName, kubeletPort, podBridge)
			if err != nil {
				return err
			}
			kf.ContainerLog, kf.ClusterDNS, kf.NodeIP = containerLog, clusterDNS, nodeIP
			if localPathDir != "" {
				kf.LocalPathDir = localPathDir
			}
			if kf.ClientCA = clientCAFile; clientCAFile == "" {
				if kf.ClientCA, err = agent.ClusterCAFile(cfg.TLSClientConfig, kf.RootDir); err != nil {
					return err
				}
			}
			pn, err := agent.PodNetworkFor(&kf, podNetwork, clusterCIDR, podBridge, vxlanID, vxlanPort, newLogger(verbose))
			if err != nil {
				return err
			}
			opts := agent.Options{Kubelet: kf, KubeletConfig: cfg, PodNetwork: pn}
			if !noNetworkPolicy {
				opts.NetworkPolicy = &agent.NetworkPolicyOptions{Table: netpol.TableName(podBridge), Log: newLogger(verbose)}
				opts.NetworkPolicyConfig = cfg
			}
			if !noProxy {
				proxyCfg := cfg
				if proxyKubeconfig != "" {
					if proxyCfg, err = clientcmd.BuildConfigFromFlags("", proxyKubeconfig); err != nil {
						return fmt.Errorf("loading the proxy's kubeconfig: %w", err)
					}
				}
				po := agent.ProxyFor(kf.HostnameOverride, clusterCIDR, podBridge, newLogger(verbose))
				po.NodePortAddresses, po.MasqueradeAll = pf.NodePortAddresses, pf.MasqueradeAll
				opts.Proxy, opts.ProxyConfig = &po, proxyCfg
			}
			return agent.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials")
	f.StringVar(&dataDir, "data-dir", datadir.Default, "directory for the node's state (DATA_DIR/agent: containerd, kubelet, images, pod-manifests; DATA_DIR/storage: local-path volumes)")
	f.StringVar(&localPathDir, "local-path-dir", "", "directory for the local-path StorageClass's volumes on this node (default DATA_DIR/storage)")
	f.StringVar(&nodeName, "node-name", "", "node name to register (default: the host name)")
	f.StringVar(&podBridge, "pod-bridge", "mizzen0", "the pod network bridge (distinct per node when several share a host)")
	f.Int32Var(&kubeletPort, "kubelet-port", 10250, "the kubelet's port")
	f.StringVar(&clientCAFile, "client-ca-file", "", "CA bundle the node server verifies callers (the apiserver) against (default: the cluster CA of --kubeconfig)")
	f.StringVar(&proxyKubeconfig, "proxy-kubeconfig", "", "kubeconfig of the service proxy, upstream's system:kube-proxy (default: --kubeconfig)")
	f.StringVar(&clusterCIDR, "cluster-cidr", "10.244.0.0/16", "the pods' CIDR, as the server's: pod traffic leaving it is masqueraded, and so is traffic to a ClusterIP from outside it")
	f.StringVar(&nodeIP, "node-ip", "", "the node's InternalIP (default: the address of the interface to the default route)")
	f.StringVar(&podNetwork, "pod-network", "vxlan", "how pods reach the other nodes' pods: vxlan (an overlay, works wherever nodes reach each other), host-gw (routes through the nodes' addresses, one L2 segment only) or none")
	f.IntVar(&vxlanID, "vxlan-id", podnet.DefaultVNI, "the vxlan pod network's VNI")
	f.IntVar(&vxlanPort, "vxlan-port", podnet.DefaultPort, "the vxlan pod network's UDP port")
	f.StringSliceVar(&pf.NodePortAddresses, "nodeport-addresses", nil, "the proxy's NodePort addresses: CIDRs, or \"primary\" (default: primary)")
	f.BoolVar(&pf.MasqueradeAll, "masquerade-all", false, "the proxy masquerades all traffic sent to a ClusterIP")
	f.BoolVar(&noProxy, "disable-proxy", false, "run no service proxy")
	f.BoolVar(&noNetworkPolicy, "disable-network-policy", false, "enforce no NetworkPolicies on this node")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the proxy's debug messages")
	f.StringSliceVar(&clusterDNS, "cluster-dns", nil, "DNS server IPs for pods with dnsPolicy ClusterFirst (mizzen server's is the 10th address of its service CIDR, 10.96.0.10 by default)")
	addContainerLogFlags(cmd, &containerLog)
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

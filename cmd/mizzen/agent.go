package main

import (
	"fmt"
	"mizzen/internal/kubelet/containerd"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
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
	var server, token string
	var containerdPath, privateRegistry string
	var kubeconfig, proxyKubeconfig, dataDir, nodeName, podBridge, clientCAFile, clusterCIDR, localPathDir, cloudProvider, nodeIP, podNetwork string
	var vxlanID, vxlanPort, proxyHealthzPort int
	var pf agent.ProxyOptions
	var noProxy, noNetworkPolicy, verbose bool
	var kubeletPort int32
	var containerLog agent.ContainerLogOptions
	var clusterDNS, unsafeSysctls []string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node: the kubelet with its own containerd and the service proxy, joining the cluster with --server and --token (or --kubeconfig)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			server, token = orEnv(server, "MIZZEN_URL"), orEnv(token, "MIZZEN_TOKEN")
			if (kubeconfig == "") == (server == "" || token == "") {
				return fmt.Errorf("join with --server and --token (or MIZZEN_URL and MIZZEN_TOKEN), or give --kubeconfig")
			}
			kf, err := agent.AgentKubelet(datadir.Dir(dataDir), nodeName, kubeletPort, podBridge)
			if err != nil {
				return err
			}
			var joined *agent.Joined
			var cfg *rest.Config
			if kubeconfig != "" {
				if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
					return fmt.Errorf("loading kubeconfig: %w", err)
				}
			} else {
				joined, err = agent.Join(ctx, agent.JoinOptions{Server: server, Token: token, Dir: datadir.Dir(dataDir), NodeName: kf.HostnameOverride})
				if err != nil {
					return fmt.Errorf("joining %s: %w", server, err)
				}
				cfg, kf.ServingCertificate = joined.KubeletConfig, joined.Serving.GetCertificate
				if clientCAFile == "" {
					clientCAFile = joined.CAFile
				}
			}
			kf.ContainerLog, kf.ClusterDNS, kf.NodeIP = containerLog, clusterDNS, nodeIP
			kf.AllowedUnsafeSysctls = unsafeSysctls
			kf.ContainerdPath, kf.PrivateRegistry = containerdPath, privateRegistry
			switch cloudProvider {
			case "":
			case "external":
				if err := agent.WithExternalCloudProvider(&kf); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--cloud-provider %q: only \"external\" (a cloud-controller-manager initializes the node) or none", cloudProvider)
			}
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
			opts := agent.Options{Kubelet: kf, KubeletConfig: cfg, Joined: joined, PodNetwork: pn}
			if !noNetworkPolicy {
				opts.NetworkPolicy = &agent.NetworkPolicyOptions{Table: netpol.TableName(podBridge), Log: newLogger(verbose)}
				opts.NetworkPolicyConfig = cfg
				if joined != nil {
					// The node's own identity may not list policies under the Node
					// authorizer; the node's network identity (system:kube-proxy) may.
					opts.NetworkPolicyConfig = joined.ProxyConfig
				}
			}
			if !noProxy {
				proxyCfg := cfg
				if joined != nil {
					proxyCfg = joined.ProxyConfig
				}
				if proxyKubeconfig != "" {
					if proxyCfg, err = clientcmd.BuildConfigFromFlags("", proxyKubeconfig); err != nil {
						return fmt.Errorf("loading the proxy's kubeconfig: %w", err)
					}
				}
				po := agent.ProxyFor(kf.HostnameOverride, clusterCIDR, podBridge, newLogger(verbose))
				po.NodePortAddresses, po.MasqueradeAll = pf.NodePortAddresses, pf.MasqueradeAll
				po.HealthzAddress = agent.ProxyHealthzAddress(proxyHealthzPort)
				po.MetricsAddress = pf.MetricsAddress
				opts.Proxy, opts.ProxyConfig = &po, proxyCfg
			}
			returnIdleMemory(ctx, verbose)
			return agent.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials (instead of joining with --server and --token)")
	f.StringVar(&server, "server", "", "the apiserver to join, https://HOST:PORT (env MIZZEN_URL)")
	f.StringVar(&token, "token", "", "join token from `mizzen token create` (env MIZZEN_TOKEN): the node checks the server's CA against it, then gets its certificates through CSRs")
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
	f.IntVar(&proxyHealthzPort, "proxy-healthz-port", agent.DefaultProxyHealthzPort, "port of the service proxy's /healthz and /livez on every address (0: none)")
	f.StringVar(&pf.MetricsAddress, "proxy-metrics-bind-address", agent.DefaultProxyMetricsAddress, "address of the service proxy's /metrics and /proxyMode over plain HTTP (0.0.0.0:10249 for every IPv4 address; empty or 0: none)")
	f.BoolVar(&noProxy, "disable-proxy", false, "run no service proxy")
	f.BoolVar(&noNetworkPolicy, "disable-network-policy", false, "enforce no NetworkPolicies on this node")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the proxy's debug messages")
	f.StringSliceVar(&unsafeSysctls, "allowed-unsafe-sysctls", nil, unsafeSysctlsUsage)
	f.StringSliceVar(&clusterDNS, "cluster-dns", nil, "DNS server IPs for pods with dnsPolicy ClusterFirst (mizzen server's is the 10th address of its service CIDR, 10.96.0.10 by default)")
	f.StringVar(&cloudProvider, "cloud-provider", "", `"external": the node registers with the taint node.cloudprovider.kubernetes.io/uninitialized until a cloud-controller-manager initializes it (addresses, providerID, topology labels)`)
	addContainerLogFlags(cmd, &containerLog)
	addRuntimeFlags(cmd, &containerdPath, &privateRegistry)
	return cmd
}

// orEnv is v, or the environment variable name when v is empty.
func orEnv(v, name string) string {
	if v == "" {
		return os.Getenv(name)
	}
	return v
}

// addRuntimeFlags are the flags of the agent's containerd, for `mizzen agent` and `mizzen server`.
func addRuntimeFlags(cmd *cobra.Command, containerdPath, privateRegistry *string) {
	f := cmd.Flags()
	f.StringVar(containerdPath, "containerd", "", "the containerd binary the agent runs (default: containerd from PATH); a ctr beside it imports images; containerd 2.x gets a version 3 configuration")
	f.StringVar(privateRegistry, "private-registry", "", "registry mirrors and credentials for the agent's containerd, in k3s's registries.yaml format (default "+containerd.DefaultRegistriesFile+" if it exists)")
}

package main

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/controllermanager"
)

func init() { register(newControllerManagerCommand) }

// newControllerManagerCommand runs the controllers that drive the cluster toward its
// declared state, one active replica at a time.
func newControllerManagerCommand() *cobra.Command {
	var kubeconfig string
	var qps float32
	var burst int
	var contentType string
	serving := controllermanager.ServingOptions{}
	opts := controllermanager.RunOptions{}
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (endpoints, garbage collector, namespace, nodes, workloads, ...)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst, cfg.ContentType = qps, burst, contentType
			// 0 on the command line means no tainting at all, as upstream; in the
			// options 0 means the default and a negative rate none.
			for _, rate := range []*float64{&opts.NodeEviction.Rate, &opts.NodeEviction.SecondaryRate} {
				if *rate == 0 {
					*rate = -1
				}
			}
			if serving.Port > 0 {
				opts.Serving = &serving
			}
			manageMemory(cmd.Context(), false)
			return controllermanager.Run(cmd.Context(), cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig with the apiserver's address and credentials (in-cluster config if empty)")
	f.StringSliceVar(&opts.Controllers, "controllers", []string{"*"}, `Controllers to run: "*" enables all on by default, "foo" enables foo, "-foo" disables foo`)
	f.BoolVar(&opts.UseServiceAccountCredentials, "use-service-account-credentials", false, "Run each controller with a token of its own ServiceAccount in kube-system, bound to upstream's system:controller:* role (mizzen server sets it, as kubeadm does); otherwise every controller uses --kubeconfig's credentials, which must then hold every controller's permissions")
	f.BoolVar(&opts.LeaderElect, "leader-elect", true, "Run controllers only while holding the Lease kube-system/kube-controller-manager")
	f.IntVar(&opts.ConcurrentSyncs, "concurrent-syncs", 5, "Workers per controller")
	f.DurationVar(&opts.NodeMonitorGracePeriod, "node-monitor-grace-period", 40*time.Second, "How long a node's Lease may go unrenewed before the node is marked Unknown")
	f.Float64Var(&opts.NodeEviction.Rate, "node-eviction-rate", 0.1, "Nodes per second that may get a NoExecute taint (their pods evicted) in a healthy zone")
	f.Float64Var(&opts.NodeEviction.SecondaryRate, "secondary-node-eviction-rate", 0.01, "Nodes per second that may get a NoExecute taint in an unhealthy zone of more than --large-cluster-size-threshold nodes (smaller unhealthy zones: none)")
	f.Float64Var(&opts.NodeEviction.UnhealthyZoneThreshold, "unhealthy-zone-threshold", 0.55, "Fraction of a zone's nodes (at least 3) that must be not Ready for the zone to count as unhealthy")
	f.IntVar(&opts.NodeEviction.LargeClusterSizeThreshold, "large-cluster-size-threshold", 50, "Nodes in a zone above which an unhealthy zone still evicts, at --secondary-node-eviction-rate")
	f.StringVar(&opts.ClusterCIDR, "cluster-cidr", "", "CIDR range pod CIDRs are allocated from (node IPAM allocates nothing when empty)")
	f.IntVar(&opts.NodeCIDRMaskSize, "node-cidr-mask-size", 24, "Prefix length of each node's pod CIDR")
	f.DurationVar(&opts.HPA.SyncPeriod, "horizontal-pod-autoscaler-sync-period", 15*time.Second, "How often each HorizontalPodAutoscaler is reconciled")
	f.Float64Var(&opts.HPA.Tolerance, "horizontal-pod-autoscaler-tolerance", 0.1, "How far the metric ratio may be from 1 before the autoscaler scales")
	f.DurationVar(&opts.HPA.DownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", 5*time.Minute, "Window of recommendations for scaling down (HPAs without behavior)")
	f.DurationVar(&opts.HPA.CPUInitializationPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", 5*time.Minute, "After a pod starts, CPU samples from before it was ready are skipped for this long")
	f.DurationVar(&opts.HPA.InitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", 30*time.Second, "After a pod starts, readiness changes this soon count as still starting")
	f.IntVar(&opts.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", 12500, "Terminated pods kept before the oldest are deleted (0 or less: never)")
	f.Float32Var(&qps, "kube-api-qps", 50, "Requests per second to the apiserver (client-side limit, each controller's own; requests it holds back are released together on a 20 ms tick)")
	f.IntVar(&burst, "kube-api-burst", 100, "Burst of requests to the apiserver above --kube-api-qps")
	f.StringVar(&contentType, "kube-api-content-type", controllermanager.DefaultContentType, "Content type of requests sent to the apiserver")
	f.IntVar(&serving.Port, "secure-port", 10257, "Port serving /healthz, /livez, /readyz and /metrics over HTTPS with a self-signed certificate and authentication and authorization delegated to the apiserver (0 disables)")
	f.StringVar(&serving.BindAddress, "bind-address", "0.0.0.0", "Address --secure-port listens on")
	f.BoolVar(&serving.Profiling, "profiling", false, "Serve /debug/pprof/ on --secure-port to callers the apiserver authorizes (off by default)")
	f.StringVar(&opts.ClusterSigningCertFile, "cluster-signing-cert-file", "", "PEM CA certificate the CSR signer issues kubelet and client certificates with (csrsigning is off without it)")
	f.StringVar(&opts.ClusterSigningKeyFile, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
	f.DurationVar(&opts.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "Longest certificate the CSR signer issues")
	f.StringVar(&opts.RootCAFile, "root-ca-file", "", "CA bundle to publish as kube-root-ca.crt (default: the kubeconfig's CA)")
	return cmd
}

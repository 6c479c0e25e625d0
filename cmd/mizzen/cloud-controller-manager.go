package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/cloud/ccm"
)

func init() { register(newCloudControllerManagerCommand) }

// newCloudControllerManagerCommand runs the cloud controllers on a cloud provider.
func newCloudControllerManagerCommand() *cobra.Command {
	var kubeconfig string
	var verbose bool
	opts := ccm.Options{}
	cmd := &cobra.Command{
		Use:   "cloud-controller-manager",
		Short: "Run the cloud controllers (node initialization and lifecycle, load balancers, routes) on a cloud provider",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := ccm.NewProvider(opts); err != nil { // bad flags fail before anything connects
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			opts.Log = newLogger(verbose)
			return ccm.Run(ctx, cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the apiserver's address and credentials (in-cluster config if empty)")
	f.StringVar(&opts.CloudProvider, "cloud-provider", "", `the cloud provider: "local" (this machine and its neighbours)`)
	f.StringVar(&opts.Local.ConfigFile, "cloud-config", "", "the provider's config file: for local, YAML with zone, region, instanceType and nodes.NAME.{zone,region,instanceType,internalIP,externalIP,labels,shutdown,removed}; read again when it changes")
	f.StringVar(&opts.Local.Zone, "zone", "", "local: every node's topology.kubernetes.io/zone unless --cloud-config says otherwise")
	f.StringVar(&opts.Local.Region, "region", "", "local: every node's topology.kubernetes.io/region unless --cloud-config says otherwise")
	f.StringVar(&opts.Local.InstanceType, "instance-type", "", "local: every node's node.kubernetes.io/instance-type unless --cloud-config says otherwise (default \"local\")")
	f.StringVar(&opts.Local.LBPool, "lb-ip-pool", "", "local: LoadBalancer addresses come from this CIDR or range FIRST-LAST, each answered by every node's proxy (default: each Service gets the nodes' addresses, as k3s's ServiceLB)")
	f.StringVar(&opts.ClusterName, "cluster-name", "kubernetes", "the cluster's name, given to the provider")
	f.StringSliceVar(&opts.Controllers, "controllers", []string{"*"}, `controllers to run: "*" all, "foo" enables foo, "-foo" disables it (`+ccm.CloudNode+", "+ccm.CloudNodeLifecycle+", "+ccm.ServiceLB+", "+ccm.NodeRoute+")")
	f.BoolVar(&opts.ConfigureCloudRoutes, "configure-cloud-routes", false, "run the route controller: the provider routes each node's pod CIDR to it (local: kernel routes on this machine, host-gw)")
	f.StringVar(&opts.ClusterCIDR, "cluster-cidr", "", "the pods' CIDR: the route controller manages routes within it only")
	f.DurationVar(&opts.NodeStatusUpdateFrequency, "node-status-update-frequency", 5*time.Minute, "how often initialized nodes' addresses are refreshed from the provider")
	f.DurationVar(&opts.NodeMonitorPeriod, "node-monitor-period", 5*time.Second, "how often nodes that are not Ready are checked with the provider (deleted if gone, tainted if shut down)")
	f.DurationVar(&opts.RouteReconciliationPeriod, "route-reconciliation-period", 10*time.Second, "how often routes are reconciled")
	f.IntVar(&opts.ConcurrentServiceSyncs, "concurrent-service-syncs", 1, "services synced at once")
	f.IntVar(&opts.ConcurrentNodeSyncs, "concurrent-node-syncs", 1, "nodes initialized at once")
	f.BoolVar(&opts.LeaderElect, "leader-elect", true, "run the controllers only while holding the Lease kube-system/cloud-controller-manager")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	return cmd
}

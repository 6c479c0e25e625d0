package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/agent"
	"mizzen/internal/proxy"
)

func init() { register(newProxyCommand) }

// newProxyCommand runs the service proxy: `mizzen proxy --kubeconfig K`.
func newProxyCommand() *cobra.Command {
	var kubeconfig string
	var pf agent.ProxyOptions
	var cleanup, verbose bool
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy: Services and EndpointSlices as nftables rules (table ip mizzen-proxy) on this node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cleanup {
				return proxy.Table{Name: pf.Table}.Delete()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			if pf.HostnameOverride == "" {
				host, err := os.Hostname()
				if err != nil {
					return err
				}
				pf.HostnameOverride = strings.ToLower(host)
			}
			pf.Log = newLogger(verbose)
			return agent.RunProxy(ctx, cfg, pf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the proxy's credentials")
	f.StringVar(&pf.HostnameOverride, "hostname-override", "", "this node's name, which decides the local endpoints (default: the host name)")
	f.StringVar(&pf.ClusterCIDR, "cluster-cidr", "", "the pods' CIDR: traffic to a ClusterIP from outside it is masqueraded (default: none, nothing is)")
	f.StringSliceVar(&pf.NodePortAddresses, "nodeport-addresses", nil, "CIDRs whose local addresses serve NodePorts (0.0.0.0/0: all), or \"primary\" (default: primary, the node's IP from its Node object)")
	f.BoolVar(&pf.MasqueradeAll, "masquerade-all", false, "masquerade all traffic sent to a ClusterIP")
	f.StringVar(&pf.HealthzAddress, "healthz-bind-address", agent.ProxyHealthzAddress(agent.DefaultProxyHealthzPort), "address serving /healthz and /livez (empty: none)")
	f.StringVar(&pf.MetricsAddress, "metrics-bind-address", agent.DefaultProxyMetricsAddress, "address serving /metrics and /proxyMode over plain HTTP (0.0.0.0:10249 for every IPv4 address; empty or 0: none)")
	f.StringVar(&pf.Table, "nftables-table", proxy.TableName, "the nftables table (family ip) the rules live in")
	f.BoolVar(&cleanup, "cleanup", false, "remove the proxy's table and exit")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	return cmd
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/proxy"
)

func init() { register(newProxyCommand) }

// proxyFlags are the service proxy's settings, standalone or bundled in an agent. The
// bundles serve no health checks: several nodes of test clusters share one host.
type proxyFlags struct {
	hostnameOverride  string
	clusterCIDR       string
	nodePortAddresses []string
	masqueradeAll     bool
	table             string
	healthzAddress    string
}

// newProxyCommand runs the service proxy: `mizzen proxy --kubeconfig K`.
func newProxyCommand() *cobra.Command {
	var kubeconfig string
	var pf proxyFlags
	var cleanup, verbose bool
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy: Services and EndpointSlices as nftables rules (table ip mizzen-proxy) on this node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cleanup {
				return proxy.Table{Name: pf.table}.Delete()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			if pf.hostnameOverride == "" {
				host, err := os.Hostname()
				if err != nil {
					return err
				}
				pf.hostnameOverride = strings.ToLower(host)
			}
			return runProxy(ctx, cfg, pf, newLogger(verbose))
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the proxy's credentials")
	f.StringVar(&pf.hostnameOverride, "hostname-override", "", "this node's name, which decides the local endpoints (default: the host name)")
	f.StringVar(&pf.clusterCIDR, "cluster-cidr", "", "the pods' CIDR: traffic to a ClusterIP from outside it is masqueraded (default: none, nothing is)")
	f.StringSliceVar(&pf.nodePortAddresses, "nodeport-addresses", nil, "CIDRs whose local addresses serve NodePorts (0.0.0.0/0: all), or \"primary\" (default: primary, the node's IP from its Node object)")
	f.BoolVar(&pf.masqueradeAll, "masquerade-all", false, "masquerade all traffic sent to a ClusterIP")
	f.StringVar(&pf.healthzAddress, "healthz-bind-address", "0.0.0.0:10256", "address serving /healthz and /livez (empty: none)")
	f.StringVar(&pf.table, "nftables-table", proxy.TableName, "the nftables table (family ip) the rules live in")
	f.BoolVar(&cleanup, "cleanup", false, "remove the proxy's table and exit")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	return cmd
}

// runProxy runs the proxy until ctx ends.
func runProxy(ctx context.Context, cfg *rest.Config, pf proxyFlags, log *slog.Logger) error {
	opts := proxy.Options{NodeName: pf.hostnameOverride, NodePortAddresses: pf.nodePortAddresses,
		MasqueradeAll: pf.masqueradeAll, Writer: proxy.Table{Name: pf.table}, HealthzBindAddress: pf.healthzAddress, Log: log}
	if pf.clusterCIDR != "" {
		p, err := netip.ParsePrefix(pf.clusterCIDR)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("--cluster-cidr %q: not an IPv4 CIDR", pf.clusterCIDR)
		}
		opts.ClusterCIDR = p.Masked()
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	opts.Client = client
	return proxy.Run(ctx, opts)
}

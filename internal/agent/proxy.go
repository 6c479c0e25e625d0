package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/proxy"
)

// ProxyOptions are the service proxy's settings, standalone or bundled in an agent.
type ProxyOptions struct {
	HostnameOverride  string
	ClusterCIDR       string
	NodePortAddresses []string
	MasqueradeAll     bool
	Table             string
	HealthzAddress    string
	// MetricsAddress serves /metrics and /proxyMode (upstream's
	// --metrics-bind-address); empty or "0" serves nothing.
	MetricsAddress string
	Log            *slog.Logger
}

// RunProxy runs the proxy until ctx ends.
func RunProxy(ctx context.Context, cfg *rest.Config, pf ProxyOptions) error {
	log := pf.Log
	if log == nil {
		log = slog.Default()
	}
	opts := proxy.Options{NodeName: pf.HostnameOverride, NodePortAddresses: pf.NodePortAddresses,
		MasqueradeAll: pf.MasqueradeAll, Writer: proxy.Table{Name: pf.Table}, HealthzBindAddress: pf.HealthzAddress,
		MetricsBindAddress: pf.MetricsAddress, Log: log}
	if pf.ClusterCIDR != "" {
		p, err := netip.ParsePrefix(pf.ClusterCIDR)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("--cluster-cidr %q: not an IPv4 CIDR", pf.ClusterCIDR)
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

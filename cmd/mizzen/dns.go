package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/dns"
)

func init() { register(newDNSCommand) }

// newDNSCommand runs the cluster DNS server: `mizzen dns --kubeconfig K`.
func newDNSCommand() *cobra.Command {
	var (
		kubeconfig string
		opts       dns.Options
		healthPort int
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run the cluster DNS server: answer for services and pods of the cluster domain, forward other names upstream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			if healthPort < 0 || healthPort > 65535 {
				return fmt.Errorf("--health-port %d is not a port", healthPort)
			}
			if healthPort > 0 {
				opts.HealthAddr = net.JoinHostPort("", strconv.Itoa(healthPort))
			}
			opts.Logger = newLogger(verbose)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			return dns.Run(ctx, cfg, opts, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver address and credentials")
	f.StringVar(&opts.Listen, "listen", dns.DefaultListen, "Address to serve DNS on, over UDP and TCP")
	f.StringVar(&opts.ClusterDomain, "cluster-domain", dns.DefaultClusterDomain, "Domain answered from the cluster's services and pods")
	f.Uint32Var(&opts.TTL, "ttl", dns.DefaultTTL, "TTL in seconds of answers from the cluster, and of negative answers")
	f.IntVar(&healthPort, "health-port", dns.DefaultHealthPort, "Port serving /health and /ready over plain HTTP; 0 disables it")
	f.StringVar(&opts.UpstreamResolvConf, "upstream-resolv-conf", dns.DefaultUpstreamResolvConf, "resolv.conf whose nameservers get every name outside the cluster domain; \"\" forwards nothing")
	f.BoolVarP(&verbose, "verbose", "v", false, "Log at debug level")
	return cmd
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/agent"
	"mizzen/internal/dashboard"
)

func init() { register(newDashboardCommand) }

// newDashboardCommand runs the web UI: `mizzen dashboard --kubeconfig K --listen ADDR`.
func newDashboardCommand() *cobra.Command {
	var (
		kubeconfig string
		opts       dashboard.Options
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Run the web UI: log in with a token and use the cluster as that user",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			opts.APIServer = cfg
			opts.Log = newLogger(verbose)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return dashboard.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig naming the apiserver and its CA; its credentials are never used: every request carries the logged-in user's token")
	f.StringVar(&opts.Listen, "listen", "0.0.0.0:8443", "Address to serve HTTPS on")
	f.StringVar(&opts.CertFile, "tls-cert-file", "", "Serving certificate (PEM); self-signed in --cert-dir when not given")
	f.StringVar(&opts.KeyFile, "tls-private-key-file", "", "Serving certificate's key (PEM)")
	f.StringVar(&opts.CertDir, "cert-dir", "/var/lib/mizzen/dashboard", "Directory keeping the self-signed serving certificate")
	f.IntVar(&opts.ProxyHealthzPort, "proxy-healthz-port", agent.DefaultProxyHealthzPort, "Port of the nodes' service proxies' /healthz, read through the apiserver's node proxy for the overview (0: not shown)")
	f.BoolVarP(&verbose, "verbose", "v", false, "Debug logging")
	return cmd
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/ingress"
)

func init() { register(newIngressCommand) }

// newIngressCommand runs the Ingress controller: `mizzen ingress --kubeconfig K`.
func newIngressCommand() *cobra.Command {
	var (
		kubeconfig          string
		httpPort, httpsPort int
		bindAddress         string
		statusAddress       string
		opts                ingress.Options
		verbose             bool
	)
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Run the Ingress controller: a reverse proxy serving the Ingresses of its IngressClass",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			var err error
			if opts.HTTPAddr, opts.HTTPSAddr, opts.StatusAddress, err = ingress.Addresses(bindAddress, httpPort, httpsPort, statusAddress); err != nil {
				return err
			}
			opts.Logger = newLogger(verbose)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			return ingress.Run(ctx, cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver address and credentials")
	f.IntVar(&httpPort, "http-port", 80, "Port serving HTTP; 0 disables it")
	f.IntVar(&httpsPort, "https-port", 443, "Port serving HTTPS (HTTP/2 and HTTP/1.1, certificates by SNI); 0 disables it")
	f.StringVar(&bindAddress, "bind-address", "0.0.0.0", "Address the ports are bound on")
	f.StringVar(&statusAddress, "publish-status-address", "", "Address written to the served Ingresses' status.loadBalancer.ingress (default: --bind-address, or the machine's primary address when that is 0.0.0.0)")
	f.StringVar(&opts.ClassName, "ingress-class", ingress.DefaultClassName, "Name of the IngressClass served; its spec.controller must be "+ingress.ControllerName)
	f.BoolVarP(&verbose, "verbose", "v", false, "Log at debug level")
	return cmd
}

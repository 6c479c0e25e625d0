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

	"mizzen/internal/hostaddr"
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
			if opts.HTTPAddr, opts.HTTPSAddr, opts.StatusAddress, err = ingressAddresses(bindAddress, httpPort, httpsPort, statusAddress); err != nil {
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

// ingressAddresses turns ports and addresses into the controller's listen addresses
// (a zero port serves nothing) and the address its Ingresses' status names.
func ingressAddresses(bind string, httpPort, httpsPort int, status string) (httpAddr, httpsAddr, statusAddr string, err error) {
	ip := net.ParseIP(bind)
	if ip == nil {
		return "", "", "", fmt.Errorf("--bind-address %q is not an IP address", bind)
	}
	for _, p := range []int{httpPort, httpsPort} {
		if p < 0 || p > 65535 {
			return "", "", "", fmt.Errorf("port %d is not a port", p)
		}
	}
	if httpPort == 0 && httpsPort == 0 {
		return "", "", "", fmt.Errorf("neither an HTTP nor an HTTPS port to serve")
	}
	if httpPort > 0 {
		httpAddr = net.JoinHostPort(bind, strconv.Itoa(httpPort))
	}
	if httpsPort > 0 {
		httpsAddr = net.JoinHostPort(bind, strconv.Itoa(httpsPort))
	}
	statusAddr = status
	if statusAddr == "" {
		statusAddr = bind
		if ip.IsUnspecified() {
			primary, err := hostaddr.PrimaryIPv4()
			if err != nil {
				return "", "", "", fmt.Errorf("--publish-status-address: %w", err)
			}
			statusAddr = primary.String()
		}
	}
	return httpAddr, httpsAddr, statusAddr, nil
}

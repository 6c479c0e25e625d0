package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"mizzen/internal/metrics"
)

func init() { register(newMetricsServerCommand) }

// newMetricsServerCommand runs the metrics server: `mizzen metrics-server --kubeconfig K`.
func newMetricsServerCommand() *cobra.Command {
	var (
		opts         metrics.Options
		verbose      bool
		registration metrics.Registration
		// registerKubeconfig holds credentials allowed to write the registration; the
		// metrics identity itself may not (RBAC).
		registerKubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "metrics-server",
		Short: "Run the metrics server: scrape kubelets and serve metrics.k8s.io (kubectl top) behind the apiserver",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = newLogger(verbose)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if registration.Address != "" {
				if registerKubeconfig == "" {
					registerKubeconfig = opts.Kubeconfig
				}
				cfg, err := metrics.LoadConfig(registerKubeconfig)
				if err != nil {
					return err
				}
				registration.Port = int32(opts.SecurePort)
				pub, err := metrics.Register(ctx, cfg, registration, opts.Log)
				if err != nil {
					return err
				}
				defer pub.Start(ctx)()
			}
			return metrics.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver address and credentials (its client certificate also reaches kubelets)")
	f.StringVar(&opts.BindAddress, "bind-address", "0.0.0.0", "Address to serve HTTPS on")
	f.IntVar(&opts.SecurePort, "secure-port", 4443, "Port to serve HTTPS on")
	f.StringVar(&opts.CertFile, "tls-cert-file", "", "Serving certificate (PEM); self-signed in --cert-dir when not given")
	f.StringVar(&opts.KeyFile, "tls-private-key-file", "", "Serving certificate's key (PEM)")
	f.StringVar(&opts.CertDir, "cert-dir", "/var/lib/mizzen/metrics-server", "Directory keeping the self-signed serving certificate")
	f.DurationVar(&opts.Resolution, "metric-resolution", metrics.DefaultResolution, "Interval between two scrapes of every kubelet")
	f.StringVar(&opts.KubeletCAFile, "kubelet-certificate-authority", "", "CA bundle verifying kubelets' serving certificates (default: the apiserver's CA from the kubeconfig)")
	f.BoolVar(&opts.KubeletInsecureTLS, "kubelet-insecure-tls", false, "Do not verify kubelets' serving certificates")
	f.StringVar(&opts.KubeletClientCertFile, "kubelet-client-certificate", "", "Client certificate presented to kubelets (default: the kubeconfig's)")
	f.StringVar(&opts.KubeletClientKeyFile, "kubelet-client-key", "", "Key of --kubelet-client-certificate")
	f.StringVar(&opts.ClientCAFile, "client-ca-file", "", "CA of client certificates accepted directly (default: from kube-system/extension-apiserver-authentication)")
	f.StringVar(&opts.RequestHeaderClientCAFile, "requestheader-client-ca-file", "", "CA of the apiserver's front-proxy client certificate (default: from kube-system/extension-apiserver-authentication)")
	f.StringSliceVar(&opts.RequestHeaderAllowedNames, "requestheader-allowed-names", nil, "Common names accepted from the front-proxy CA (default: from kube-system/extension-apiserver-authentication)")
	f.StringVar(&registration.Address, "register-address", "", "When set, create the Service, EndpointSlice and APIService v1beta1.metrics.k8s.io pointing at this IP and --secure-port")
	f.StringVar(&registerKubeconfig, "register-kubeconfig", "", "Credentials for --register-address, allowed to write Services, EndpointSlices, Leases and APIServices (default: --kubeconfig, whose metrics identity RBAC does not allow it)")
	f.BoolVarP(&verbose, "verbose", "v", false, "Debug logging")
	return cmd
}

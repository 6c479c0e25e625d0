package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"mizzen/internal/componentserve"
	"mizzen/internal/scheduler"
)

func init() { register(newSchedulerCommand) }

// newSchedulerCommand runs the scheduler: `mizzen scheduler --kubeconfig K`.
func newSchedulerCommand() *cobra.Command {
	var opts scheduler.Options
	var serving componentserve.Options
	leaderElect := true
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler: assign pending pods to nodes through the apiserver",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("leader-elect") || opts.ConfigFile == "" {
				opts.LeaderElect = &leaderElect
			}
			if serving.Port > 0 {
				opts.Serving = &serving
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			returnIdleMemory(ctx, false)
			return scheduler.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver address and credentials")
	f.StringVar(&opts.ConfigFile, "config", "", "Path to a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file")
	f.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader through the kube-system/kube-scheduler Lease before scheduling, so several replicas can run with one active")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", "0", "Address serving /metrics and /healthz over plain HTTP to anyone, e.g. "+scheduler.DefaultMetricsAddr+" (upstream's removed insecure port); \"0\" disables it. --secure-port serves them with authentication")
	f.IntVar(&serving.Port, "secure-port", 10259, "Port serving /healthz, /livez, /readyz and /metrics over HTTPS with a self-signed certificate and authentication and authorization delegated to the apiserver (0 disables)")
	f.StringVar(&serving.BindAddress, "bind-address", "0.0.0.0", "Address --secure-port listens on")
	f.BoolVar(&serving.Profiling, "profiling", false, "Serve /debug/pprof/ on --secure-port to callers the apiserver authorizes")
	f.StringVar(&opts.Identity, "leader-elect-identity", "", "Identity recorded in the Lease (default hostname_<uuid>)")
	return cmd
}

package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"mizzen/internal/scheduler"
)

func init() { register(newSchedulerCommand) }

// newSchedulerCommand runs the scheduler: `mizzen scheduler --kubeconfig K`.
func newSchedulerCommand() *cobra.Command {
	var opts scheduler.Options
	leaderElect := true
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler: assign pending pods to nodes through the apiserver",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("leader-elect") || opts.ConfigFile == "" {
				opts.LeaderElect = &leaderElect
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return scheduler.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver address and credentials")
	f.StringVar(&opts.ConfigFile, "config", "", "Path to a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file")
	f.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader through the kube-system/kube-scheduler Lease before scheduling, so several replicas can run with one active")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", scheduler.DefaultMetricsAddr, "Address serving /metrics and /healthz over plain HTTP; \"0\" disables it")
	f.StringVar(&opts.Identity, "leader-elect-identity", "", "Identity recorded in the Lease (default hostname_<uuid>)")
	return cmd
}

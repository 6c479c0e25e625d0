package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/trace"
)

func init() { register(newTraceCommand) }

// newTraceCommand is `mizzen trace pod|deployment NAME`: each step of a pod's start as
// the components recorded it (internal/trace).
func newTraceCommand() *cobra.Command {
	var kubeconfig, namespace string
	client := func() (kubernetes.Interface, string, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, "", err
		}
		ns := namespace
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, "", err
			}
		}
		c, err := kubernetes.NewForConfig(cfg)
		return c, ns, err
	}
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Show each step of a pod's start: who did it, when, and how long it took",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's)")
	cmd.AddCommand(&cobra.Command{
		Use:   "pod NAME",
		Short: "The steps of one pod, from creation to Ready",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := client()
			if err != nil {
				return err
			}
			j, err := trace.Pod(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			return trace.PrintPod(cmd.OutOrStdout(), j)
		},
	}, &cobra.Command{
		Use:   "deployment NAME",
		Short: "Percentiles of each step over a Deployment's pods",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := client()
			if err != nil {
				return err
			}
			js, err := trace.Deployment(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			return trace.PrintDeployment(cmd.OutOrStdout(), ns, args[0], js)
		},
	})
	return cmd
}

package main

import (
	"mizzen/internal/datadir"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func init() { register(newKubectlCommand) }

// newKubectlCommand embeds the upstream kubectl. Without --kubeconfig or KUBECONFIG it
// talks to the local server through its admin kubeconfig.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl",
		Short:              "Run the upstream kubectl against the cluster",
		DisableFlagParsing: true,
		Run: func(cmd *cobra.Command, args []string) {
			if os.Getenv("KUBECONFIG") == "" && !hasFlag(args, "--kubeconfig") {
				local := datadir.Dir(datadir.Default).AdminKubeconfig()
				if _, err := os.Stat(local); err == nil {
					os.Setenv("KUBECONFIG", local)
				}
			}
			streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
			k := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
				PluginHandler: kubectlcmd.NewDefaultPluginHandler([]string{"kubectl"}),
				Arguments:     append([]string{"kubectl"}, args...),
				ConfigFlags: genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().
					WithDiscoveryBurst(300).WithDiscoveryQPS(50.0).WithWarningPrinter(streams),
				IOStreams: streams,
			})
			k.SetArgs(args)
			cmdutil.CheckErr(k.Execute())
		},
	}
}

// hasFlag reports whether args carry the flag name, as "--name" or "--name=value".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// Command mizzen runs one Kubernetes component per subcommand (apiserver, scheduler,
// controller-manager, kubelet, ...), the server and agent bundles, and the embedded
// kubectl. Each subcommand lives in its own file and only parses flags; the logic is in
// internal/.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "mizzen",
		Short:         "mizzen: the Kubernetes architecture, one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

// subcommands is filled by each subcommand file's init, so adding a component touches
// only its own file.
var subcommands []func() *cobra.Command

func register(newCmd func() *cobra.Command) { subcommands = append(subcommands, newCmd) }

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"mizzen/internal/datadir"
	"mizzen/internal/killall"
)

func init() {
	register(func() *cobra.Command { return newKillallCommand(false) })
	register(func() *cobra.Command { return newKillallCommand(true) })
}

// newKillallCommand is `mizzen killall` (k3s-killall.sh's job) or, with uninstall,
// `mizzen uninstall`, which also removes the data directory.
func newKillallCommand(uninstall bool) *cobra.Command {
	var opts killall.Options
	var dir string
	cmd := &cobra.Command{
		Use:   "killall",
		Short: "Stop every mizzen process and pod of the data directory and remove their mounts, cgroups, pod network and nftables tables",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("%s needs root", cmd.Name())
			}
			opts.Dir = datadir.Dir(dir)
			run := killall.Run
			if uninstall {
				run = killall.Uninstall
			}
			report, err := run(opts)
			fmt.Fprintln(cmd.OutOrStdout(), report)
			if uninstall && err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", dir)
			}
			return err
		},
	}
	if uninstall {
		cmd.Use = "uninstall"
		cmd.Short = "Do what killall does, then remove the data directory and everything in it"
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", datadir.Default, "the data directory whose cluster to stop")
	f.StringVar(&opts.Bridge, "pod-bridge", "", "the pod network's bridge (default: the one the agent's CNI configuration names; none when the agent never ran)")
	f.DurationVar(&opts.GracePeriod, "grace-period", 0, "how long mizzen processes get to stop after SIGTERM before SIGKILL (default 20s)")
	return cmd
}

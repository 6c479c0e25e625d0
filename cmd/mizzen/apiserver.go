package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { register(newAPIServerCommand) }

func newAPIServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the apiserver alone against an external etcd cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.etcdServers == "" {
				return fmt.Errorf("--etcd-servers is required: `mizzen apiserver` runs without embedded etcd (use `mizzen server` for that)")
			}
			opts := f.options()
			handler, stop, err := f.startFlightRecorder()
			if err != nil {
				return err
			}
			defer stop()
			opts.FlightRecorder = handler
			return runControlPlane(opts)
		},
	}
	f.add(cmd, false)
	return cmd
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"mizzen/internal/etcd"
)

func init() { register(newEtcdCommand) }

func newEtcdCommand() *cobra.Command {
	var mc etcd.MemberConfig
	var verbose bool
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one member of an etcd cluster (for external-etcd setups)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			m, err := etcd.Start(ctx, mc, newLogger(verbose))
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "etcd member %s serving clients on %v\n", mc.Name, mc.ClientURLs)
			select {
			case <-ctx.Done():
			case <-m.Done():
			}
			m.Close()
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&mc.Name, "name", "default", "member name")
	fl.StringVar(&mc.DataDir, "data-dir", "default.etcd", "data directory")
	fl.StringSliceVar(&mc.ClientURLs, "listen-client-urls", []string{"http://127.0.0.1:2379"}, "URLs to serve clients on")
	fl.StringSliceVar(&mc.PeerURLs, "listen-peer-urls", nil, "URLs to serve peers on")
	fl.StringVar(&mc.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member")
	fl.StringVar(&mc.ClusterState, "initial-cluster-state", "new", "new or existing")
	fl.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	return cmd
}

package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"mizzen/internal/datadir"
	"mizzen/internal/etcdsnapshot"
)

func init() { register(newEtcdSnapshotCommand) }

// snapshotFlags are shared by the etcd-snapshot subcommands (k3s's flags).
type snapshotFlags struct {
	dataDir, dir, name, node string
	ext                      etcdsnapshot.External
	retention                int
}

func (f *snapshotFlags) snapshotDir() string {
	if f.dir != "" {
		return f.dir
	}
	return datadir.Dir(f.dataDir).Snapshots()
}

func (f *snapshotFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", datadir.Default, "the server's data directory")
	fl.StringVar(&f.dir, "dir", "", "directory of the snapshots (default DATA_DIR/db/snapshots)")
	fl.StringVar(&f.node, "node-name", etcdsnapshot.NodeName(), "node name in snapshot file names")
}

func newEtcdSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd-snapshot",
		Short: "Save, list, delete and prune snapshots of the server's etcd",
	}
	cmd.AddCommand(snapshotSaveCommand(), snapshotListCommand(), snapshotDeleteCommand(), snapshotPruneCommand())
	return cmd
}

func snapshotSaveCommand() *cobra.Command {
	var f snapshotFlags
	cmd := &cobra.Command{
		Use:   "save",
		Short: "Take a snapshot of the running server's etcd (or of --etcd-servers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cli, err := etcdsnapshot.Connect(ctx, datadir.Dir(f.dataDir), f.ext)
			if err != nil {
				return err
			}
			defer cli.Close()
			s, err := etcdsnapshot.Save(ctx, cli, f.snapshotDir(), f.name, f.node, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s saved.\n", s.Name)
			return nil
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", etcdsnapshot.OnDemandName, "snapshot name; the file is NAME-NODE-UNIXTIME")
	fl.StringVar(&f.ext.Servers, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster (default: the embedded etcd of --data-dir's running server)")
	fl.StringVar(&f.ext.CAFile, "etcd-cafile", "", "CA of the external etcd's serving certificates")
	fl.StringVar(&f.ext.CertFile, "etcd-certfile", "", "client certificate for the external etcd")
	fl.StringVar(&f.ext.KeyFile, "etcd-keyfile", "", "client key for the external etcd")
	return cmd
}

func snapshotListCommand() *cobra.Command {
	var f snapshotFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the snapshots",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := etcdsnapshot.List(f.snapshotDir())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 1, ' ', 0)
			fmt.Fprintln(w, "Name\tLocation\tSize\tCreated")
			for _, s := range all {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", s.Name, s.Location(), s.Size, s.Created.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	f.add(cmd)
	return cmd
}

func snapshotDeleteCommand() *cobra.Command {
	var f snapshotFlags
	cmd := &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete snapshots by name",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			deleted, err := etcdsnapshot.Delete(f.snapshotDir(), args...)
			for _, n := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s deleted.\n", n)
			}
			return err
		},
	}
	f.add(cmd)
	return cmd
}

func snapshotPruneCommand() *cobra.Command {
	var f snapshotFlags
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete this node's snapshots of --name beyond the newest --snapshot-retention",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			deleted, err := etcdsnapshot.Prune(f.snapshotDir(), f.name, f.node, f.retention)
			for _, n := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s deleted.\n", n)
			}
			return err
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&f.name, "name", etcdsnapshot.OnDemandName, "name of the snapshots to prune")
	cmd.Flags().IntVar(&f.retention, "snapshot-retention", 5, "how many of the newest snapshots to keep")
	return cmd
}

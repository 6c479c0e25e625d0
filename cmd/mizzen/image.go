package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
)

func init() { register(newImageCommand) }

// newImageCommand manages the images of a node's runtime without a registry.
func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the images of a node's container runtime",
	}
	cmd.AddCommand(newImageImportCommand())
	return cmd
}

// newImageImportCommand imports OCI or docker-archive tarballs into a node's containerd.
func newImageImportCommand() *cobra.Command {
	var dataDir, endpoint, containerdDir string
	cmd := &cobra.Command{
		Use:   "import FILE.tar [FILE.tar...]",
		Short: "Import OCI or docker-archive image tarballs into a node's containerd (the agent's by default)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			opts := containerd.Options{DataDir: datadir.Dir(dataDir).Containerd()}
			switch {
			case endpoint != "" && containerdDir != "":
				return fmt.Errorf("--runtime-endpoint and --containerd-data-dir both name a runtime; give one")
			case endpoint != "":
				socket, ok := strings.CutPrefix(endpoint, "unix://")
				if !ok && strings.Contains(endpoint, "://") {
					return fmt.Errorf("--runtime-endpoint %q: only unix:// sockets are supported", endpoint)
				}
				opts.Address = socket
			case containerdDir != "":
				opts.DataDir = containerdDir
			}
			socket := opts.Address
			if socket == "" {
				socket = opts.Socket()
			}
			if _, err := os.Stat(socket); err != nil {
				return fmt.Errorf("no containerd at %s (is the node's agent running?): %w", socket, err)
			}
			for _, file := range files {
				if err := containerd.ImportArchive(cmd.Context(), opts, file); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "imported %s\n", file)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", datadir.Default, "the node's data directory; its agent's containerd is the target")
	f.StringVar(&endpoint, "runtime-endpoint", "", "containerd socket to import into instead (unix:///path or a path)")
	f.StringVar(&containerdDir, "containerd-data-dir", "", "data directory of a containerd started by `mizzen kubelet --containerd-data-dir`")
	return cmd
}

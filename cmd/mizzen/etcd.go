package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"mizzen/internal/etcd"
)

func init() { register(newEtcdCommand) }

func newEtcdCommand() *cobra.Command {
	var mc etcd.MemberConfig
	var verbose bool
	var client, peer etcd.TLSFiles
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one member of an etcd cluster (for external-etcd setups)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var err error
			if mc.ClientTLS, err = tlsFlags("", client, mc.ClientURLs); err != nil {
				return err
			}
			if mc.PeerTLS, err = tlsFlags("peer-", peer, mc.PeerURLs); err != nil {
				return err
			}
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
	fl.StringVar(&client.CertFile, "cert-file", "", "serving certificate for clients (https client URLs)")
	fl.StringVar(&client.KeyFile, "key-file", "", "key of --cert-file")
	fl.StringVar(&client.CAFile, "trusted-ca-file", "", "CA that clients' certificates must come from (mutual TLS)")
	fl.StringVar(&peer.CertFile, "peer-cert-file", "", "certificate presented to and served to peers (for serving and client use)")
	fl.StringVar(&peer.KeyFile, "peer-key-file", "", "key of --peer-cert-file")
	fl.StringVar(&peer.CAFile, "peer-trusted-ca-file", "", "CA that peers' certificates must come from (mutual TLS)")
	return cmd
}

// tlsFlags checks one side's TLS flags (etcd's names, prefix "" or "peer-"): all or
// none, and given exactly when the URLs are https. A member that serves TLS always
// requires certificates of the CA of the other side: there is no one-way TLS.
func tlsFlags(prefix string, files etcd.TLSFiles, urls []string) (*etcd.TLSFiles, error) {
	https := false
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			https = true
		}
	}
	given := files.CertFile != "" || files.KeyFile != "" || files.CAFile != ""
	switch {
	case !given && !https:
		return nil, nil
	case files.CertFile == "" || files.KeyFile == "" || files.CAFile == "":
		return nil, fmt.Errorf("--%scert-file, --%skey-file and --%strusted-ca-file go together, and https URLs need them", prefix, prefix, prefix)
	case !https:
		return nil, fmt.Errorf("--%scert-file is given but the %sURLs are not https", prefix, strings.TrimSuffix(prefix, "-")+" ")
	}
	return &files, nil
}

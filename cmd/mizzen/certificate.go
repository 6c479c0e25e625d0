package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"mizzen/internal/certs"
	"mizzen/internal/datadir"
)

func init() { register(newCertificateCommand) }

func newCertificateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "certificate",
		Aliases: []string{"cert"},
		Short:   "Check and rotate the data directory's certificates",
	}
	var dataDir string
	check := &cobra.Command{
		Use:   "check",
		Short: "Print each certificate, its user and groups, its expiry and whether it is due for renewal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := certs.List(datadir.Dir(dataDir))
			if err != nil {
				return err
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "FILENAME\tSUBJECT\tGROUPS\tUSAGES\tEXPIRES\tRESIDUAL TIME\tSTATUS")
			for _, c := range all {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.File, c.User, orNone(strings.Join(c.Groups, ",")),
					orNone(strings.Join(c.Usages, ",")), c.Expires.UTC().Format("Jan 02, 2006 15:04 UTC"), residual(c.Expires.Sub(now)), c.Status(now))
			}
			return w.Flush()
		},
	}
	check.Flags().StringVar(&dataDir, "data-dir", datadir.Default, "the server's data directory")
	var services []string
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Reissue the certificates of --service (default: all) from the same CA; restart the server to serve them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rotated, err := certs.Rotate(datadir.Dir(dataDir), services)
			for _, s := range rotated {
				fmt.Fprintf(cmd.OutOrStdout(), "Certificate %s rotated.\n", s)
			}
			return err
		},
	}
	rotate.Flags().StringVar(&dataDir, "data-dir", datadir.Default, "the server's data directory")
	rotate.Flags().StringSliceVar(&services, "service", nil, "certificates to rotate, by name under tls/ without .crt (admin, scheduler, kubelet, etcd, ...); default all but the CAs")
	cmd.AddCommand(check, rotate)
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// residual is the time left, in the largest whole unit, as k3s prints it.
func residual(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d >= 365*24*time.Hour:
		return fmt.Sprintf("%dy", int(d/(365*24*time.Hour)))
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%dh", int(d/time.Hour))
}

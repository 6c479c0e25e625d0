package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/jointoken"
)

func init() { register(newTokenCommand) }

// newTokenCommand manages join tokens ("K10<ca-hash>::<id>.<secret>", see
// internal/jointoken): the credential a new server or agent passes to --token.
func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and delete the tokens servers and agents join the cluster with",
	}
	var dataDir, kubeconfig string
	client := func() (kubernetes.Interface, []byte, error) {
		path := kubeconfig
		if path == "" {
			path = datadir.Dir(dataDir).AdminKubeconfig()
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		ca := cfg.CAData
		if len(ca) == 0 && cfg.CAFile != "" {
			if ca, err = os.ReadFile(cfg.CAFile); err != nil {
				return nil, nil, err
			}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		return cs, ca, err
	}
	flags := func(c *cobra.Command) {
		c.Flags().StringVar(&dataDir, "data-dir", datadir.Default, "the server's data directory (for its admin kubeconfig)")
		c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "an admin kubeconfig (default DATA_DIR/admin.kubeconfig)")
	}
	var opts jointoken.Options
	var role string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, ca, err := client()
			if err != nil {
				return err
			}
			if len(ca) == 0 {
				return fmt.Errorf("the kubeconfig names no CA certificate, which the token must carry the hash of")
			}
			opts.Role = jointoken.Role(role)
			tok, err := jointoken.Create(cmd.Context(), cs, ca, opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok.String())
			return nil
		},
	}
	flags(create)
	create.Flags().StringVar(&role, "role", string(jointoken.RoleAgent), "what the token joins: agent or server")
	create.Flags().DurationVar(&opts.TTL, "ttl", 24*time.Hour, "how long the token lasts (0: it never expires)")
	create.Flags().StringVar(&opts.Description, "description", "", "a note on what the token is for")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (without their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, _, err := client()
			if err != nil {
				return err
			}
			infos, err := jointoken.List(cmd.Context(), cs)
			if err != nil {
				return err
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(w, "TOKEN-ID\tROLE\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
			for _, i := range infos {
				ttl, expires := "<forever>", "<never>"
				if !i.Expires.IsZero() {
					expires = i.Expires.UTC().Format(time.RFC3339)
					ttl = "<invalid>"
					if !i.Expired(now) {
						ttl = i.Expires.Sub(now).Round(time.Minute).String()
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, orNone(string(i.Role())), ttl, expires,
					strings.Join(i.Usages, ","), orNone(i.Description), strings.Join(i.Groups, ","))
			}
			return w.Flush()
		},
	}
	flags(list)
	del := &cobra.Command{
		Use:   "delete TOKEN-ID|TOKEN...",
		Short: "Delete tokens; a machine already joined keeps its own credentials",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := client()
			if err != nil {
				return err
			}
			for _, a := range args {
				id, err := jointoken.Delete(cmd.Context(), cs, a)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bootstrap token %q deleted\n", id)
			}
			return nil
		},
	}
	flags(del)
	cmd.AddCommand(create, list, del)
	return cmd
}

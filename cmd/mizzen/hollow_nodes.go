package main

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/flightrecorder"
	"mizzen/internal/kubelet/hollow"
	"mizzen/internal/pki"
)

func init() { register(newHollowNodesCommand) }

// newHollowNodesCommand runs many kubelets in this process on the in-memory CRI runtime.
func newHollowNodesCommand() *cobra.Command {
	var (
		kubeconfig, prefix string
		rootDir            string
		nodeCADir          string
		profilingAddress   string
		recorderWindow     time.Duration
		count, firstIndex  int
		maxPods            int64
		images             []string
	)
	cmd := &cobra.Command{
		Use:   "hollow-nodes",
		Short: "Run N kubelets in one process on a fake CRI runtime, for scale tests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if recorderWindow > 0 && profilingAddress == "" {
				return fmt.Errorf("--flight-recorder-window needs --profiling-address: the window is served with the profiles")
			}
			if profilingAddress != "" {
				recorder, stopRecorder, err := startFlightRecorder(recorderWindow)
				if err != nil {
					return err
				}
				defer stopRecorder()
				serveProfiles(profilingAddress, recorder)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			opts := hollow.Options{
				Count:           count,
				FirstIndex:      firstIndex,
				NamePrefix:      prefix,
				Config:          cfg,
				MaxPods:         maxPods,
				PreloadedImages: images,
				RootDir:         rootDir,
			}
			if nodeCADir != "" {
				if opts.NodeCredentials, err = nodeCredentials(nodeCADir); err != nil {
					return err
				}
			}
			return hollow.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig the hollow kubelets use")
	f.IntVar(&count, "count", 1, "number of hollow nodes")
	f.IntVar(&firstIndex, "first-index", 0, "index of the first node: this process runs nodes first-index to first-index+count-1 (their names, addresses and pod ranges come from the index), so that several processes can share a cluster's hollow nodes, as kubemark gives each hollow node a process of its own")
	f.StringVar(&prefix, "name-prefix", "hollow-node-", "node i is named <prefix><i>")
	f.Int64Var(&maxPods, "max-pods", 110, "pods capacity of each node")
	f.StringSliceVar(&images, "preloaded-images", nil, "images present on every node without a pull")
	f.StringVar(&rootDir, "root-dir", "", "directory for the hollow kubelets' pod volumes, one subdirectory per node (default: a temporary directory, removed on a clean exit)")
	f.StringVar(&profilingAddress, "profiling-address", "", "serve /debug/pprof/ over plain HTTP on this address (e.g. 127.0.0.1:6061), for scale runs; off when empty")
	f.DurationVar(&recorderWindow, "flight-recorder-window", 0, flightRecorderUsage+"; needs --profiling-address")
	f.StringVar(&nodeCADir, "node-ca-dir", "", "directory of the cluster CA's ca.crt and ca.key (DATA_DIR/tls): each hollow kubelet then authenticates as its node (system:node:<name> in system:nodes, a client certificate of its own) as a real kubelet does, rather than with --kubeconfig's credentials")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

// nodeCredentials issues each hollow node a client certificate from the CA in dir,
// which must exist (nothing is created there).
func nodeCredentials(dir string) (func(string) ([]byte, []byte, error), error) {
	ca, err := pki.LoadCA(dir, datadir.CAName)
	if err != nil {
		return nil, fmt.Errorf("--node-ca-dir: %w", err)
	}
	return func(node string) ([]byte, []byte, error) {
		issued, err := ca.IssueClient("system:node:"+node, []string{"system:nodes"})
		if err != nil {
			return nil, nil, err
		}
		return issued.CertPEM, issued.KeyPEM, nil
	}, nil
}

// serveProfiles serves Go's profiles of this process on addr, unauthenticated: the
// hollow nodes are a test harness, and addr should be a loopback address. recorder,
// when set, serves the flight recorder's window.
func serveProfiles(addr string, recorder http.Handler) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if recorder != nil {
		mux.Handle(flightrecorder.Path, recorder)
	}
	go func() { _ = http.ListenAndServe(addr, mux) }()
}

// Package apiserver starts a real mizzen apiserver on embedded etcd for tests: each
// call gets its own data directory and ports, and everything stops when the test ends.
package apiserver

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"

	"k8s.io/client-go/rest"

	"mizzen/internal/controlplane/core"
)

// Server is a running test control plane.
type Server struct {
	*core.ControlPlane
	DataDir string
	cancel  context.CancelFunc
}

// Start runs etcd and the apiserver for the test and returns cluster-admin credentials.
func Start(t testing.TB) *rest.Config {
	return StartServer(t).AdminConfig
}

// StartServer is Start returning the whole control plane (kubeconfig path, URL, ...).
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartWithDir(t, t.TempDir())
}

// StartWithDir runs the control plane on a given data directory, so a test can stop it
// and start it again on the same state.
func StartWithDir(t testing.TB, dir string) *Server {
	t.Helper()
	return StartWithDirPort(t, dir, "0")
}

// StartWithDirPort is StartWithDir on a given port ("0" for any free one), so a
// restarted server is reachable at the address clients already use.
func StartWithDirPort(t testing.TB, dir, port string) *Server {
	t.Helper()
	return start(t, dir, port, nil)
}

// StartWithOptions runs a control plane whose options the test adjusts. Like upstream's
// test servers, a test control plane runs without the ServiceAccount admission plugin
// (it has no controller-manager to create "default" accounts) and TaintNodesByCondition
// (no node lifecycle controller lifts the not-ready taint of the nodes tests create)
// unless the test turns them back on by clearing DisableAdmissionPlugins.
func StartWithOptions(t testing.TB, adjust func(*core.Options)) *Server {
	t.Helper()
	return start(t, t.TempDir(), "0", adjust)
}

func start(t testing.TB, dir, port string, adjust func(*core.Options)) *Server {
	t.Helper()
	portNum, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("bad port %q", port)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Logs go to stderr: a test's own logger may not be written after the test ends.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := core.Options{DataDir: dir, BindAddress: "127.0.0.1", SecurePort: portNum, Log: log,
		DisableAdmissionPlugins: []string{"ServiceAccount", "TaintNodesByCondition"}}
	if adjust != nil {
		adjust(&opts)
	}
	cp, err := core.Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("starting the apiserver: %v", err)
	}
	s := &Server{ControlPlane: cp, DataDir: dir, cancel: cancel}
	t.Cleanup(s.Stop)
	cfg := rest.CopyConfig(cp.AdminConfig)
	cfg.QPS, cfg.Burst = 1000, 2000
	s.AdminConfig = cfg
	return s
}

// Stop stops the control plane and waits until it is down.
func (s *Server) Stop() {
	s.cancel()
	<-s.Done
}

package fake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Serve serves the runtime's CRI services on a Unix socket at socketPath until ctx ends.
// A stale socket file is replaced. The returned error is nil after a clean shutdown.
func (r *Runtime) Serve(ctx context.Context, socketPath string) error {
	lis, err := listen(socketPath)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	runtimeapi.RegisterImageServiceServer(srv, r)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		srv.GracefulStop()
	}()
	err = srv.Serve(lis)
	<-stopped
	_ = os.Remove(socketPath)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// listen opens the Unix socket at socketPath, replacing a stale one.
func listen(socketPath string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socketPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	return net.Listen("unix", socketPath)
}

package kubelet

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// initializingRuntime answers as containerd's CRI plugin does while it recovers its
// containers after a restart: "server is not initialized yet", until it is.
type initializingRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	refusals atomic.Int32 // calls still to refuse
	calls    atomic.Int32
}

var errNotInitialized = errors.New("server is not initialized yet")

func (r *initializingRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	r.calls.Add(1)
	if r.refusals.Add(-1) >= 0 {
		return nil, errNotInitialized
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "initializing", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (r *initializingRuntime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

// TestConnectRuntimeWaitsForAnInitializingRuntime: a kubelet restarted beside a
// containerd still recovering its containers connects once the CRI answers, instead
// of failing its start on the first "not initialized" answer.
func TestConnectRuntimeWaitsForAnInitializingRuntime(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rt := &initializingRuntime{}
	rt.refusals.Store(3)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	runtimeapi.RegisterImageServiceServer(srv, rt)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, is, err := ConnectRuntime(ctx, "unix://"+sock, "")
	if err != nil {
		t.Fatalf("ConnectRuntime gave up on a runtime that answers on its 4th call: %v", err)
	}
	defer rs.Close(ctx)
	if is == nil {
		t.Fatal("no image service")
	}
	v, err := rs.Version(ctx, "v1")
	if err != nil || v.RuntimeName != "initializing" {
		t.Fatalf("Version after connecting: %v, %v", v, err)
	}
	if n := rt.calls.Load(); n < 4 {
		t.Fatalf("the runtime was asked %d times, want at least 4", n)
	}
}

// TestConnectRuntimeStopsWithItsContext: retries end with the caller's context.
func TestConnectRuntimeStopsWithItsContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rt := &initializingRuntime{}
	rt.refusals.Store(1 << 30)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := ConnectRuntime(ctx, "unix://"+sock, ""); err == nil {
		t.Fatal("connected to a runtime that never initializes")
	}
	if ctx.Err() == nil {
		t.Fatal("ConnectRuntime returned before its context ended, while the runtime still answered")
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// runCSIHostPath is a small CSI node plugin backed by a directory: volume ID names a
// directory under --root, published into a pod by bind mount. It registers itself
// with the kubelet through the kubelet's plugins_registry directory, as a driver's
// node-driver-registrar sidecar does, and prints each CSI call it serves on stdout.
// Run as a privileged pod with the kubelet's root directory mounted at the same path
// with Bidirectional propagation, so its mounts reach the host.
func runCSIHostPath(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("csi-hostpath", stderr)
	name := fs.String("driver-name", "hostpath.csi.mizzen.io", "the CSI driver's name")
	endpoint := fs.String("endpoint", "", "unix socket the CSI services listen on (the kubelet's plugins/DRIVER/csi.sock)")
	registration := fs.String("registration-dir", "", "the kubelet's plugins_registry directory")
	root := fs.String("root", "/csi-data", "directory whose subdirectories are the volumes")
	nodeID := fs.String("node-id", os.Getenv("NODE_NAME"), "the node's ID for the driver (default $NODE_NAME)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *endpoint == "" || *registration == "" {
		fmt.Fprintln(stderr, "csi-hostpath: --endpoint and --registration-dir are required")
		return 2
	}
	d := &csiHostPath{name: *name, endpoint: *endpoint, root: *root, nodeID: *nodeID, out: stdout}
	regSocket := filepath.Join(*registration, *name+"-reg.sock")
	var servers []*grpc.Server
	for _, sock := range []string{*endpoint, regSocket} {
		if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		_ = os.Remove(sock) // a socket left by the container's previous run
		l, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		srv := grpc.NewServer()
		registerapi.RegisterRegistrationServer(srv, d)
		csipb.RegisterIdentityServer(srv, d)
		csipb.RegisterNodeServer(srv, d)
		go func() { _ = srv.Serve(l) }()
		servers = append(servers, srv)
	}
	d.printf("serving CSI driver %s on %s, registered through %s", *name, *endpoint, regSocket)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	for _, s := range servers {
		s.Stop()
	}
	// The kubelet sees the registration socket go and forgets the driver.
	_ = os.Remove(regSocket)
	_ = os.Remove(*endpoint)
	return 0
}

type csiHostPath struct {
	registerapi.UnimplementedRegistrationServer
	csipb.UnimplementedNodeServer
	csipb.UnimplementedIdentityServer
	name, endpoint, root, nodeID string
	mu                           sync.Mutex
	out                          io.Writer
}

func (d *csiHostPath) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *csiHostPath) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: d.name, Endpoint: d.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (d *csiHostPath) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	d.printf("registration: registered=%v %s", s.PluginRegistered, s.Error)
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *csiHostPath) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.1"}, nil
}

func (d *csiHostPath) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *csiHostPath) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

func (d *csiHostPath) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	d.printf("publish %s", r.VolumeId)
	src := filepath.Join(d.root, filepath.Base(r.VolumeId))
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	flags := uintptr(syscall.MS_BIND)
	if err := syscall.Mount(src, r.TargetPath, "", flags, ""); err != nil {
		return nil, err
	}
	if r.Readonly {
		if err := syscall.Mount("", r.TargetPath, "", flags|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return nil, err
		}
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *csiHostPath) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.printf("unpublish %s", r.VolumeId)
	_ = syscall.Unmount(r.TargetPath, 0)
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(r.TargetPath)
}

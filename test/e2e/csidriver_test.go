package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// hostPathCSI is a small CSI node plugin backed by a host directory: each volume is a
// directory under root, published by bind mount. It registers with a kubelet through
// the kubelet's plugins_registry, as a driver's node-driver-registrar does.
type hostPathCSI struct {
	registerapi.UnimplementedRegistrationServer
	csipb.UnimplementedNodeServer
	csipb.UnimplementedIdentityServer
	name, endpoint, root string
	mu                   sync.Mutex
	calls                []string
}

func (d *hostPathCSI) note(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
}

func (d *hostPathCSI) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: d.name, Endpoint: d.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (d *hostPathCSI) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *hostPathCSI) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.1"}, nil
}

func (d *hostPathCSI) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "e2e-node"}, nil
}

func (d *hostPathCSI) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

func (d *hostPathCSI) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	d.note("publish " + r.VolumeId)
	src := filepath.Join(d.root, r.VolumeId)
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	if err := syscall.Mount(src, r.TargetPath, "", syscall.MS_BIND, ""); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *hostPathCSI) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.note("unpublish " + r.VolumeId)
	_ = syscall.Unmount(r.TargetPath, 0)
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(r.TargetPath)
}

// serve starts the driver on its endpoint and its registration socket in registryDir.
func (d *hostPathCSI) serve(t *testing.T, registryDir string) {
	t.Helper()
	for _, dir := range []string{registryDir, filepath.Dir(d.endpoint)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, sock := range []string{d.endpoint, filepath.Join(registryDir, d.name+"-reg.sock")} {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		registerapi.RegisterRegistrationServer(srv, d)
		csipb.RegisterIdentityServer(srv, d)
		csipb.RegisterNodeServer(srv, d)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// runCSIHostPath is a small CSI node plugin backed by a directory: volume ID names an
// entry under --root, a directory for a filesystem volume (published into a pod by bind
// mount) or a block device node for a block volume (bind mounted onto the file the
// kubelet names). With --stage it stages volumes first (a bind mount at the staging
// path, or for a block volume a check of the device) and publishes from there; with
// --mount-group it applies a pod's fsGroup itself (VOLUME_MOUNT_GROUP: the published
// root is given to the group). It registers itself
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
	stage := fs.Bool("stage", false, "advertise STAGE_UNSTAGE_VOLUME and stage volumes")
	mountGroup := fs.Bool("mount-group", false, "advertise VOLUME_MOUNT_GROUP and apply the pod's fsGroup")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *endpoint == "" || *registration == "" {
		fmt.Fprintln(stderr, "csi-hostpath: --endpoint and --registration-dir are required")
		return 2
	}
	d := &csiHostPath{name: *name, endpoint: *endpoint, root: *root, nodeID: *nodeID, out: stdout, stage: *stage, mountGroup: *mountGroup}
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
	stage, mountGroup            bool
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
	var caps []*csipb.NodeServiceCapability
	add := func(t csipb.NodeServiceCapability_RPC_Type) {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	if d.stage {
		add(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	}
	if d.mountGroup {
		add(csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// source is the volume's entry under the root; a block volume's must be a block device.
func (d *csiHostPath) source(id string, c *csipb.VolumeCapability) (string, error) {
	src := filepath.Join(d.root, filepath.Base(id))
	info, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	if c.GetBlock() != nil && (info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0) {
		return "", fmt.Errorf("volume %s is not a block device", id)
	}
	if c.GetMount() != nil && !info.IsDir() {
		return "", fmt.Errorf("volume %s is not a directory", id)
	}
	return src, nil
}

func (d *csiHostPath) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	d.printf("stage %s%s", r.VolumeId, blockNote(r.VolumeCapability))
	src, err := d.source(r.VolumeId, r.VolumeCapability)
	if err != nil {
		return nil, err
	}
	if r.VolumeCapability.GetBlock() != nil {
		return &csipb.NodeStageVolumeResponse{}, nil // a device needs no staging here
	}
	if mounted(r.StagingTargetPath) {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	return &csipb.NodeStageVolumeResponse{}, syscall.Mount(src, r.StagingTargetPath, "", syscall.MS_BIND, "")
}

func (d *csiHostPath) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.printf("unstage %s", r.VolumeId)
	if mounted(r.StagingTargetPath) {
		if err := syscall.Unmount(r.StagingTargetPath, 0); err != nil {
			return nil, err
		}
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *csiHostPath) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	group := r.VolumeCapability.GetMount().GetVolumeMountGroup()
	note := blockNote(r.VolumeCapability)
	if group != "" {
		note += " mountGroup=" + group
	}
	d.printf("publish %s%s", r.VolumeId, note)
	src, err := d.source(r.VolumeId, r.VolumeCapability)
	if err != nil {
		return nil, err
	}
	if d.stage && r.VolumeCapability.GetMount() != nil {
		src = r.StagingTargetPath
	}
	if r.VolumeCapability.GetBlock() != nil {
		// The kubelet made the parent; the target is a file the device is bound onto.
		f, err := os.OpenFile(r.TargetPath, os.O_CREATE|os.O_RDONLY, 0o600)
		if err != nil {
			return nil, err
		}
		_ = f.Close()
	} else if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
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
	if group != "" && !r.Readonly {
		gid, err := strconv.Atoi(group)
		if err != nil {
			return nil, fmt.Errorf("volume mount group %q: %w", group, err)
		}
		if err := os.Chown(r.TargetPath, -1, gid); err != nil {
			return nil, err
		}
		if err := os.Chmod(r.TargetPath, 0o2775); err != nil {
			return nil, err
		}
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func blockNote(c *csipb.VolumeCapability) string {
	if c.GetBlock() != nil {
		return " block"
	}
	return ""
}

// mounted says whether path is a mount point in this mount namespace; a bind mount
// within one filesystem keeps its device number, so mountinfo is asked.
func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func (d *csiHostPath) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.printf("unpublish %s", r.VolumeId)
	_ = syscall.Unmount(r.TargetPath, 0)
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(r.TargetPath)
}

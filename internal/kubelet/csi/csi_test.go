package csi_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"mizzen/internal/kubelet/csi"
	"mizzen/internal/kubelet/volume"
)

// fakeDriver is a hostPath-like CSI driver: staging and publishing make directories.
type fakeDriver struct {
	registerapi.UnimplementedRegistrationServer
	csipb.UnimplementedNodeServer
	socket     string
	mu         sync.Mutex
	calls      []string
	registered *registerapi.RegistrationStatus
}

func (d *fakeDriver) record(call string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call)
}

func (d *fakeDriver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "hostpath.csi.mizzen.io", Endpoint: d.socket, SupportedVersions: []string{"1.0.0"}}, nil
}

func (d *fakeDriver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	d.mu.Lock()
	d.registered = s
	d.mu.Unlock()
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *fakeDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "node-a-id", MaxVolumesPerNode: 7,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.hostpath.csi/node": "node-a"}}}, nil
}

func (d *fakeDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{Type: &csipb.NodeServiceCapability_Rpc{
		Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}}}}, nil
}

func (d *fakeDriver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	d.record("stage " + r.VolumeId)
	return &csipb.NodeStageVolumeResponse{}, os.MkdirAll(r.StagingTargetPath, 0o755)
}

func (d *fakeDriver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	d.record("publish " + r.VolumeId + " pod=" + r.VolumeContext["csi.storage.k8s.io/pod.name"])
	if err := os.MkdirAll(r.TargetPath, 0o755); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, os.WriteFile(filepath.Join(r.TargetPath, "from-driver"), []byte(r.VolumeId), 0o644)
}

func (d *fakeDriver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.record("unstage " + r.VolumeId)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *fakeDriver) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.record("unpublish " + r.VolumeId)
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(r.TargetPath)
}

type sources struct {
	claim *v1.PersistentVolumeClaim
	pv    *v1.PersistentVolume
}

func (s sources) ConfigMap(context.Context, string, string) (*v1.ConfigMap, error) { return nil, nil }
func (s sources) Secret(context.Context, string, string) (*v1.Secret, error)       { return nil, nil }
func (s sources) ResourceValue(*v1.Pod, *v1.ResourceFieldSelector) (string, error) { return "", nil }
func (s sources) ServiceAccountToken(context.Context, *v1.Pod, string, int64) (string, time.Time, error) {
	return "", time.Time{}, nil
}
func (s sources) PersistentVolumeClaim(context.Context, string, string) (*v1.PersistentVolumeClaim, error) {
	return s.claim, nil
}
func (s sources) PersistentVolume(context.Context, string) (*v1.PersistentVolume, error) {
	return s.pv, nil
}
func (s sources) ClusterTrustBundle(context.Context, string) (*certificatesv1.ClusterTrustBundle, error) {
	return nil, nil
}
func (s sources) ClusterTrustBundles(context.Context, string) ([]certificatesv1.ClusterTrustBundle, error) {
	return nil, nil
}
func (s sources) CreatePodCertificateRequest(context.Context, *v1.Pod, *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return nil, nil
}
func (s sources) PodCertificateRequest(context.Context, string, string) (*certificatesv1.PodCertificateRequest, error) {
	return nil, nil
}

func TestRegistrationAndPublish(t *testing.T) {
	root := t.TempDir()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}})
	m := csi.NewManager(csi.Options{Client: client, NodeName: "node-a", RootDir: root})
	if err := os.MkdirAll(m.RegistryDir(), 0o750); err != nil {
		t.Fatal(err)
	}
	d := &fakeDriver{socket: filepath.Join(m.RegistryDir(), "hostpath-reg.sock")}
	l, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, d)
	csipb.RegisterNodeServer(srv, d)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	ctx := t.Context()
	m.Scan(ctx)
	if d.registered == nil || !d.registered.PluginRegistered {
		t.Fatalf("registration status = %+v", d.registered)
	}
	csiNode, err := client.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dr := csiNode.Spec.Drivers; len(dr) != 1 || dr[0].Name != "hostpath.csi.mizzen.io" || dr[0].NodeID != "node-a-id" ||
		len(dr[0].TopologyKeys) != 1 || *dr[0].Allocatable.Count != 7 || csiNode.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("CSINode = %+v", csiNode)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if node.Annotations[csi.NodeIDAnnotation] != `{"hostpath.csi.mizzen.io":"node-a-id"}` {
		t.Errorf("node annotation = %q", node.Annotations[csi.NodeIDAnnotation])
	}

	// A pod's claim bound to a CSI volume: staged, published, and unpublished with the pod.
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "claim-uid"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "claim-uid"},
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.mizzen.io", VolumeHandle: "vol-1"}}}}
	vm := volume.NewManager(volume.Options{RootDir: root, Sources: sources{claim, pv}, CSI: m})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"}, Spec: v1.PodSpec{Volumes: []v1.Volume{{
		Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}}
	for range 2 { // the second sync finds it published
		got, err := vm.SetUp(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(got["data"].Path, "from-driver")); err != nil || string(b) != "vol-1" {
			t.Fatalf("published volume: %q %v", b, err)
		}
	}
	if err := vm.TearDownVolumes(ctx, "pod-uid"); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	calls := d.calls
	d.mu.Unlock()
	if len(calls) != 4 || calls[0] != "stage vol-1" || calls[1] != "publish vol-1 pod=web" || calls[2] != "unpublish vol-1" || calls[3] != "unstage vol-1" {
		t.Errorf("driver calls = %q", calls)
	}

	// Two pods share the volume: it stays staged until the second one goes.
	other := pod.DeepCopy()
	other.Name, other.UID = "web2", "pod-uid-2"
	for _, p := range []*v1.Pod{pod, other} {
		if _, err := vm.SetUp(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	unstages := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := 0
		for _, c := range d.calls {
			if c == "unstage vol-1" {
				n++
			}
		}
		return n
	}
	if err := vm.TearDownVolumes(ctx, "pod-uid"); err != nil {
		t.Fatal(err)
	}
	if n := unstages(); n != 1 {
		t.Errorf("unstaged while another pod uses the volume (%d unstages)", n)
	}
	if err := vm.TearDownVolumes(ctx, "pod-uid-2"); err != nil {
		t.Fatal(err)
	}
	if n := unstages(); n != 2 {
		t.Errorf("not unstaged after the last pod (%d unstages)", n)
	}

	// The socket goes: the driver leaves the CSINode.
	srv.Stop()
	_ = os.Remove(d.socket)
	m.Scan(ctx)
	csiNode, _ = client.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	if len(csiNode.Spec.Drivers) != 0 {
		t.Errorf("drivers after deregistration = %+v", csiNode.Spec.Drivers)
	}
}

func TestSupportsFSGroup(t *testing.T) {
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	rwop := []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}
	tests := []struct {
		name     string
		policy   storagev1.FSGroupPolicy
		fsType   string
		modes    []v1.PersistentVolumeAccessMode
		group    bool
		readOnly bool
		want     bool
	}{
		{"no fsGroup", storagev1.FileFSGroupPolicy, "ext4", rwo, false, false, false},
		{"None", storagev1.NoneFSGroupPolicy, "ext4", rwo, true, false, false},
		{"read-only", storagev1.FileFSGroupPolicy, "ext4", rwo, true, true, false},
		{"File, any volume", storagev1.FileFSGroupPolicy, "", rwx, true, false, true},
		{"RWOWithFSType, RWO with fsType", storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, "ext4", rwo, true, false, true},
		{"RWOWithFSType, RWOP with fsType", storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, "xfs", rwop, true, false, true},
		{"RWOWithFSType, no fsType", storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, "", rwo, true, false, false},
		{"RWOWithFSType, RWX", storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, "ext4", rwx, true, false, false},
		{"RWOWithFSType, no modes", storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, "ext4", nil, true, false, false},
	}
	for _, tt := range tests {
		if got := csi.SupportsFSGroup(tt.policy, tt.fsType, tt.modes, tt.group, tt.readOnly); got != tt.want {
			t.Errorf("%s: SupportsFSGroup = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// groupDriver is fakeDriver without staging, optionally with VOLUME_MOUNT_GROUP, that
// publishes block volumes as files and records the mount group it is handed.
type groupDriver struct {
	fakeDriver
	mountGroup bool
}

func (d *groupDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	if !d.mountGroup {
		return &csipb.NodeGetCapabilitiesResponse{}, nil
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{Type: &csipb.NodeServiceCapability_Rpc{
		Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}}}}}, nil
}

func (d *groupDriver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if r.VolumeCapability.GetBlock() != nil {
		d.record("publish-block " + r.VolumeId)
		return &csipb.NodePublishVolumeResponse{}, os.WriteFile(r.TargetPath, nil, 0o600)
	}
	d.record("publish " + r.VolumeId + " group=" + r.VolumeCapability.GetMount().GetVolumeMountGroup())
	if err := os.MkdirAll(r.TargetPath, 0o755); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, os.WriteFile(filepath.Join(r.TargetPath, "f"), nil, 0o644)
}

// startDriver serves d on a registration socket of m and registers it.
func startDriver(t *testing.T, m *csi.Manager, d *groupDriver) {
	t.Helper()
	if err := m.Prepare(); err != nil {
		t.Fatal(err)
	}
	d.socket = filepath.Join(m.RegistryDir(), "hostpath-reg.sock")
	l, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, d)
	csipb.RegisterNodeServer(srv, d)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	m.Scan(t.Context())
	if d.registered == nil || !d.registered.PluginRegistered {
		t.Fatalf("registration status = %+v", d.registered)
	}
}

func csiClaim(mode v1.PersistentVolumeMode, fsType string) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "claim-uid"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef:    &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "claim-uid"},
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeMode: &mode,
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
			Driver: "hostpath.csi.mizzen.io", VolumeHandle: "vol-1", FSType: fsType}}}}
	return claim, pv
}

// TestFSGroup: the kubelet gives a published volume to the pod's fsGroup when the
// CSIDriver's policy says so, and hands the group to a driver with VOLUME_MOUNT_GROUP
// instead of applying it.
func TestFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	const gid = 4321
	policy := func(p storagev1.FSGroupPolicy) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "hostpath.csi.mizzen.io"}, Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &p}}
	}
	tests := []struct {
		name       string
		driver     *storagev1.CSIDriver // nil: no CSIDriver object
		fsType     string
		mountGroup bool
		wantGroup  bool   // the kubelet chowned the published tree
		wantCall   string // what the driver was asked
	}{
		{"File", policy(storagev1.FileFSGroupPolicy), "", false, true, "publish vol-1 group="},
		{"None", policy(storagev1.NoneFSGroupPolicy), "ext4", false, false, "publish vol-1 group="},
		{"no CSIDriver, no fsType", nil, "", false, false, "publish vol-1 group="},
		{"no CSIDriver, fsType", nil, "ext4", false, true, "publish vol-1 group="},
		{"VOLUME_MOUNT_GROUP", policy(storagev1.FileFSGroupPolicy), "", true, false, "publish vol-1 group=4321"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}})
			if tt.driver != nil {
				if _, err := client.StorageV1().CSIDrivers().Create(t.Context(), tt.driver, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			m := csi.NewManager(csi.Options{Client: client, NodeName: "node-a", RootDir: root})
			d := &groupDriver{mountGroup: tt.mountGroup}
			startDriver(t, m, d)
			claim, pv := csiClaim(v1.PersistentVolumeFilesystem, tt.fsType)
			vm := volume.NewManager(volume.Options{RootDir: root, Sources: sources{claim, pv}, CSI: m})
			group := int64(gid)
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"}, Spec: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{FSGroup: &group},
				Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
					PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}}
			got, err := vm.SetUp(t.Context(), pod)
			if err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(got["data"].Path, "f"), &st); err != nil {
				t.Fatal(err)
			}
			if (st.Gid == gid) != tt.wantGroup {
				t.Errorf("published file's group = %d; want the fsGroup: %v", st.Gid, tt.wantGroup)
			}
			d.mu.Lock()
			calls := d.calls
			d.mu.Unlock()
			if len(calls) != 1 || calls[0] != tt.wantCall {
				t.Errorf("driver calls = %q, want [%q]", calls, tt.wantCall)
			}
		})
	}
}

// TestBlock: a CSI block volume is published to a file under the kubelet's
// volumeDevices tree, reaches the container as a device, and is unpublished with the
// pod.
func TestBlock(t *testing.T) {
	root := t.TempDir()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}})
	m := csi.NewManager(csi.Options{Client: client, NodeName: "node-a", RootDir: root})
	d := &groupDriver{}
	startDriver(t, m, d)
	claim, pv := csiClaim(v1.PersistentVolumeBlock, "")
	vm := volume.NewManager(volume.Options{RootDir: root, Sources: sources{claim, pv}, CSI: m})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"}, Spec: v1.PodSpec{
		Volumes: []v1.Volume{{Name: "raw", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}}
	got, err := vm.SetUp(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	raw := got["raw"]
	target := filepath.Join(root, "plugins/kubernetes.io/csi/volumeDevices/publish/pv/pod-uid")
	if !raw.Block {
		t.Fatalf("block volume = %+v", raw)
	}
	if dest, err := os.Readlink(raw.Path); err != nil || dest != target {
		t.Errorf("device link %s -> %q (%v), want %s", raw.Path, dest, err, target)
	}
	c := &v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}}}
	devs, err := volume.ContainerDevices(c, got)
	if err != nil || len(devs) != 1 || devs[0].HostPath != raw.Path || devs[0].ContainerPath != "/dev/xvda" || devs[0].Permissions != "mrw" {
		t.Errorf("devices = %+v, %v", devs, err)
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "raw", MountPath: "/data"}}
	if _, err := volume.ContainerMounts(c, got, nil); err == nil || err.Error() != `cannot find volume "raw" to mount into container "c"` {
		t.Errorf("mounting a block volume: %v", err)
	}
	if err := vm.TearDownVolumes(t.Context(), "pod-uid"); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	calls := d.calls
	d.mu.Unlock()
	if len(calls) != 2 || calls[0] != "publish-block vol-1" || calls[1] != "unpublish vol-1" {
		t.Errorf("driver calls = %q", calls)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "pod-uid", "volumeDevices")); !os.IsNotExist(err) {
		t.Errorf("pod's device links left behind: %v", err)
	}
}

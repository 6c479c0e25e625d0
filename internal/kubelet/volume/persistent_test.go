package volume

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"mizzen/internal/localpath"
)

func claimVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

func TestClaimVolumes(t *testing.T) {
	m, src, _ := newTestManager(t)
	storage := t.TempDir()
	m.opts.LocalPathDir = storage
	hostDir := t.TempDir()
	localPathDir := filepath.Join(storage, localpath.DirName("pvc-1", "ns", "lp"))
	bound := func(name, volume string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	}
	claimRef := func(name string) *v1.ObjectReference {
		return &v1.ObjectReference{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}
	}
	src.claims["ns/host"] = bound("host", "pv-host")
	src.volumes["pv-host"] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-host"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef: claimRef("host"), PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}}}
	src.claims["ns/lp"] = bound("lp", "pvc-1")
	src.volumes["pvc-1"] = &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": localpath.Provisioner}},
		Spec: v1.PersistentVolumeSpec{ClaimRef: claimRef("lp"), PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: localPathDir}}}}
	src.claims["ns/pending"] = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}

	pod := testPod(claimVolume("a", "host", false), claimVolume("b", "lp", true), claimVolume("c", "pending", false), claimVolume("d", "missing", false))
	got, err := m.SetUp(t.Context(), pod)
	if got["a"].Path != hostDir || got["a"].ReadOnly || !got["a"].Writable {
		t.Errorf("a = %+v", got["a"])
	}
	if got["b"].Path != localPathDir || !got["b"].ReadOnly {
		t.Errorf("b = %+v", got["b"])
	}
	if info, err := os.Stat(localPathDir); err != nil || info.Mode().Perm() != 0o777 {
		t.Errorf("local-path directory: %v %v", info, err)
	}
	if policy, _ := os.ReadFile(filepath.Join(storage, ".reclaim", "pvc-1")); string(policy) != "Delete" {
		t.Errorf("recorded policy = %q", policy)
	}
	for _, want := range []string{
		`MountVolume.SetUp failed for volume "c" : error processing PVC ns/pending: PVC ns/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")`,
		`MountVolume.SetUp failed for volume "d" : error processing PVC ns/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	if _, ok := got["c"]; ok {
		t.Error("an unbound claim's volume is mounted")
	}

	// A claim being deleted does not start new pods.
	now := metav1.Now()
	src.claims["ns/host"].DeletionTimestamp = &now
	if _, err := m.SetUp(t.Context(), testPod(claimVolume("a", "host", false))); err == nil || !strings.Contains(err.Error(), "is being deleted") {
		t.Errorf("err = %v", err)
	}
}

// TestLocalBlockVolume: a local volume of volumeMode Block reaches the pod as a link to
// its device, given to the container through volumeDevices; a path that is not a block
// device, or a volume type without block support, fails the volume.
func TestLocalBlockVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod of a block device node needs root")
	}
	m, src, _ := newTestManager(t)
	dir := t.TempDir()
	device := filepath.Join(dir, "loop-like")
	if err := syscall.Mknod(device, syscall.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "plain")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	block := v1.PersistentVolumeBlock
	add := func(name string, source v1.PersistentVolumeSource) {
		uid := types.UID("uid-" + name)
		src.claims["ns/"+name] = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name, VolumeMode: &block}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
		src.volumes["pv-"+name] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: v1.PersistentVolumeSpec{
			ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: name, UID: uid}, VolumeMode: &block, PersistentVolumeSource: source}}
	}
	add("dev", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: device}})
	add("file", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: regular}})
	add("host", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: device}})
	pod := testPod(claimVolume("raw", "dev", true), claimVolume("f", "file", false), claimVolume("h", "host", false))
	got, err := m.SetUp(t.Context(), pod)
	raw := got["raw"]
	if dest, lerr := os.Readlink(raw.Path); !raw.Block || lerr != nil || dest != device {
		t.Errorf("raw = %+v, links to %q (%v)", raw, dest, lerr)
	}
	for _, want := range []string{
		`MountVolume.SetUp failed for volume "f" : ` + regular + ` is not a block device`,
		`MountVolume.SetUp failed for volume "h" : volume pv-host has volumeMode Block, which its volume type does not support`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	c := &v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}}}
	devs, err := ContainerDevices(c, got)
	if err != nil || len(devs) != 1 || devs[0].HostPath != raw.Path || devs[0].Permissions != "r" {
		t.Errorf("devices of a read-only claim = %+v, %v", devs, err)
	}
	c.VolumeDevices = []v1.VolumeDevice{{Name: "f", DevicePath: "/dev/xvdb"}}
	if _, err := ContainerDevices(c, got); err == nil || err.Error() != "could not find block volume f" {
		t.Errorf("a device of a volume that is not ready: %v", err)
	}
	if err := m.TearDownVolumes(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(raw.Path); !os.IsNotExist(err) {
		t.Errorf("device link left behind: %v", err)
	}
	if _, err := os.Stat(device); err != nil {
		t.Errorf("the device itself went with the pod: %v", err)
	}
}

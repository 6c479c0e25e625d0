package volume

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

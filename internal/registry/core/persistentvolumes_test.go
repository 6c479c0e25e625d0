package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newPV(mutate func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               rl("storage", "10Gi"),
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv1"}},
	}}
	mutate(pv)
	defaultPersistentVolume(pv)
	return pv
}

func TestPersistentVolumeDefaultsAndCreate(t *testing.T) {
	pv := newPV(func(*corev1.PersistentVolume) {})
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		*pv.Spec.HostPath.Type != corev1.HostPathUnset {
		t.Errorf("spec not defaulted: %+v", pv.Spec)
	}
	pv.Status.Phase = corev1.VolumeBound
	persistentVolumesResource().Strategy.PrepareForCreate(context.Background(), pv)
	if pv.Status.Phase != corev1.VolumePending || pv.Status.LastPhaseTransitionTime == nil {
		t.Errorf("status = %+v, want Pending with a transition time", pv.Status)
	}
}

func TestPersistentVolumeValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolume)
		want   []string
	}{
		{"valid", func(*corev1.PersistentVolume) {}, nil},
		{"no access modes", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }, []string{"spec.accessModes: Required value"}},
		{"no capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil }, []string{"spec.capacity: Required value"}},
		{"zero capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = rl("storage", "0") },
			[]string{`spec.capacity[storage]: Invalid value: "0": must be greater than zero`}},
		{"no source", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil },
			[]string{"spec: Required value: must specify a volume type"}},
		{"bad access mode", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		},
			[]string{`spec.accessModes: Unsupported value: "ReadSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, persistentVolumesResource().Strategy.Validate(context.Background(), newPV(tc.mutate)), tc.want)
		})
	}
	old := newPV(func(*corev1.PersistentVolume) {})
	moved := old.DeepCopy()
	moved.Spec.HostPath.Path = "/elsewhere"
	assertErrors(t, persistentVolumesResource().Strategy.ValidateUpdate(context.Background(), moved, old),
		[]string{"spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"})
}

func TestPersistentVolumePrinter(t *testing.T) {
	pv := newPV(func(pv *corev1.PersistentVolume) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "app", Name: "data"}
		pv.Spec.StorageClassName = "local"
		pv.Status.Phase = corev1.VolumeBound
	})
	assertRow(t, persistentVolumesResource().Printer.Row(pv),
		[]interface{}{"pv1", "10Gi", "RWO,RWX", "Retain", "Bound", "app/data", "local", "<unset>", "", "<unknown>", "Filesystem"})
}

func TestPersistentVolumeClaims(t *testing.T) {
	r := persistentVolumeClaimsResource()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")},
	}}
	r.Strategy.Default(pvc)
	r.Strategy.PrepareForCreate(context.Background(), pvc)
	if *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("pvc not defaulted: %+v", pvc)
	}
	assertErrors(t, r.Strategy.Validate(context.Background(), pvc), nil)
	assertRow(t, r.Printer.Row(pvc), []interface{}{"data", "Pending", "", "", "", "", "<unset>", "<unknown>", "Filesystem"})

	noStorage := pvc.DeepCopy()
	noStorage.Spec.Resources.Requests = nil
	noStorage.Spec.AccessModes = nil
	assertErrors(t, r.Strategy.Validate(context.Background(), noStorage), []string{
		"spec.accessModes: Required value: at least 1 access mode is required", "spec.resources[storage]: Required value"})

	bound := pvc.DeepCopy()
	bound.Spec.VolumeName = "pv1"
	bound.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes, Capacity: rl("storage", "10Gi")}
	bound.Annotations = map[string]string{storageClassAnnotation: "slow"}
	assertRow(t, r.Printer.Row(bound), []interface{}{"data", "Bound", "pv1", "10Gi", "RWO", "slow", "<unset>", "<unknown>", "Filesystem"})

	assertErrors(t, r.Strategy.ValidateUpdate(context.Background(), bound, pvc), nil)
	grown := bound.DeepCopy()
	grown.Spec.Resources.Requests = rl("storage", "20Gi")
	assertErrors(t, r.Strategy.ValidateUpdate(context.Background(), grown, bound), nil)
	shrunk := grown.DeepCopy()
	shrunk.Spec.Resources.Requests = rl("storage", "5Gi")
	assertErrors(t, r.Strategy.ValidateUpdate(context.Background(), shrunk, grown), []string{
		"spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"})
	pendingGrown := pvc.DeepCopy()
	pendingGrown.Spec.Resources.Requests = rl("storage", "20Gi")
	assertErrors(t, r.Strategy.ValidateUpdate(context.Background(), pendingGrown, pvc), []string{
		"spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"})
	remoded := bound.DeepCopy()
	remoded.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	assertErrors(t, r.Strategy.ValidateUpdate(context.Background(), remoded, bound), []string{
		"spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"})
}

func TestPersistentVolumeSourceDefaults(t *testing.T) {
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}}}
	defaultPersistentVolume(pv)
	d := pv.Spec.AzureDisk
	if d.CachingMode == nil || *d.CachingMode != corev1.AzureDataDiskCachingReadWrite || d.FSType == nil || *d.FSType != "ext4" ||
		d.Kind == nil || *d.Kind != corev1.AzureSharedBlobDisk || d.ReadOnly == nil || *d.ReadOnly {
		t.Errorf("azure disk = %+v", d)
	}
	rbd := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		RBD: &corev1.RBDPersistentVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i"}}}}
	defaultPersistentVolume(rbd)
	if r := rbd.Spec.RBD; r.RBDPool != "rbd" || r.RadosUser != "admin" || r.Keyring != "/etc/ceph/keyring" {
		t.Errorf("rbd = %+v", r)
	}
}

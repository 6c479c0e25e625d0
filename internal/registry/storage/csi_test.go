package storage

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestCSIDriverDefaultValidatePrint(t *testing.T) {
	r := findResource(t, "csidrivers")
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com", CreationTimestamp: threeDaysAgo}}
	r.Strategy.Default(d)
	want := storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false), StorageCapacity: ptr.To(false),
		RequiresRepublish: ptr.To(false), SELinuxMount: ptr.To(false),
		FSGroupPolicy:        ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
	}
	if !reflect.DeepEqual(d.Spec, want) {
		t.Errorf("defaulted spec = %+v, want %+v", d.Spec, want)
	}
	assertErrs(t, r.Strategy.Validate(ctx, d), nil)

	bad := d.DeepCopy()
	bad.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Forever"}
	bad.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a", ExpirationSeconds: ptr.To[int64](60)}, {Audience: "a"}}
	assertErrs(t, r.Strategy.Validate(ctx, bad), []fieldErr{
		{field.ErrorTypeInvalid, "spec.tokenRequests[0].expirationSeconds"},
		{field.ErrorTypeDuplicate, "spec.tokenRequests[1].audience"},
		// upstream reports unsupported modes at the list, without an index
		{field.ErrorTypeNotSupported, "spec.volumeLifecycleModes"},
	})

	changed := d.DeepCopy()
	changed.Spec.AttachRequired = ptr.To(false)
	changed.Spec.PodInfoOnMount = ptr.To(true)
	// upstream spells this path "attachedRequired"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, changed, d), []fieldErr{{field.ErrorTypeInvalid, "spec.attachedRequired"}})
	modes := d.DeepCopy()
	modes.Spec.VolumeLifecycleModes = append(modes.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, modes, d), []fieldErr{{field.ErrorTypeInvalid, "spec.volumeLifecycleModes"}})
	period := d.DeepCopy()
	period.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To[int64](5)
	assertErrs(t, r.Strategy.Validate(ctx, period), []fieldErr{{field.ErrorTypeInvalid, "spec.nodeAllocatableUpdatePeriodSeconds"}})

	assertColumns(t, r, "Name", "AttachRequired", "PodInfoOnMount", "StorageCapacity", "TokenRequests", "RequiresRepublish", "Modes", "Age")
	if got, want := r.Printer.Row(d), []interface{}{"csi.example.com", true, false, false, "<unset>", false, "Persistent", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

func TestCSINode(t *testing.T) {
	r := findResource(t, "csinodes")
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: threeDaysAgo},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "csi.example.com", NodeID: "n1", TopologyKeys: []string{"topology.example.com/zone"}},
		}}}
	assertErrs(t, r.Strategy.Validate(ctx, n), nil)

	bad := n.DeepCopy()
	bad.Spec.Drivers = append(bad.Spec.Drivers, storagev1.CSINodeDriver{Name: "csi.example.com", TopologyKeys: []string{"x", "x"}})
	assertErrs(t, r.Strategy.Validate(ctx, bad), []fieldErr{
		{field.ErrorTypeRequired, "spec.drivers[1].nodeID"},
		{field.ErrorTypeDuplicate, "spec.drivers[1].name"},
		// upstream reports topology key problems at the driver
		{field.ErrorTypeDuplicate, "spec.drivers[1]"},
	})

	changed := n.DeepCopy()
	changed.Spec.Drivers[0].NodeID = "n2"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, changed, n), []fieldErr{{field.ErrorTypeInvalid, "spec.drivers"}})
	recount := n.DeepCopy()
	recount.Spec.Drivers[0].Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To[int32](8)}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, recount, n), nil)
	added := n.DeepCopy()
	added.Spec.Drivers = append(added.Spec.Drivers, storagev1.CSINodeDriver{Name: "other.example.com", NodeID: "n1"})
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, added, n), nil)

	if got, want := r.Printer.Row(added), []interface{}{"node-1", int64(2), "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

func TestVolumeAttachment(t *testing.T) {
	r := findResource(t, "volumeattachments")
	if !r.HasStatus {
		t.Errorf("volumeattachments must serve a status subresource")
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-123", CreationTimestamp: threeDaysAgo},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}}}
	assertErrs(t, r.Strategy.Validate(ctx, va), nil)

	tests := []struct {
		name   string
		mutate func(*storagev1.VolumeAttachment)
		want   []fieldErr
	}{
		{"no attacher", func(v *storagev1.VolumeAttachment) { v.Spec.Attacher = "" }, []fieldErr{{field.ErrorTypeRequired, "spec.attacher"}}},
		{"no source", func(v *storagev1.VolumeAttachment) { v.Spec.Source = storagev1.VolumeAttachmentSource{} },
			[]fieldErr{{field.ErrorTypeRequired, "spec.source"}}},
		{"two sources", func(v *storagev1.VolumeAttachment) { v.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{} },
			[]fieldErr{{field.ErrorTypeForbidden, "spec.source"}}},
		{"bad node name", func(v *storagev1.VolumeAttachment) { v.Spec.NodeName = "Node_1" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.nodeName"}}},
		{"negative error code", func(v *storagev1.VolumeAttachment) {
			v.Status.AttachError = &storagev1.VolumeError{Message: "boom", ErrorCode: ptr.To[int32](-1)}
		}, []fieldErr{{field.ErrorTypeInvalid, "status.attachError.errorCode"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := va.DeepCopy()
			tt.mutate(v)
			assertErrs(t, r.Strategy.Validate(ctx, v), tt.want)
		})
	}

	moved := va.DeepCopy()
	moved.Spec.NodeName = "node-2"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, moved, va), []fieldErr{{field.ErrorTypeInvalid, "spec"}})

	va.Status.Attached = true
	assertColumns(t, r, "Name", "Attacher", "PV", "Node", "Attached", "Age")
	if got, want := r.Printer.Row(va), []interface{}{"csi-123", "csi.example.com", "pv-1", "node-1", true, "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

func TestVolumeAttachmentStatusClearedOnCreate(t *testing.T) {
	r := findResource(t, "volumeattachments")
	va := &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	r.Strategy.PrepareForCreate(ctx, va)
	if va.Status.Attached {
		t.Errorf("status kept on create")
	}
}

func TestCSIStorageCapacity(t *testing.T) {
	r := findResource(t, "csistoragecapacities")
	if !r.Namespaced || r.Kind != "CSIStorageCapacity" {
		t.Errorf("identity = %+v", r)
	}
	c := &storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Name: "csisc-1", Namespace: "kube-system", CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))},
		NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{"topology.example.com/zone": "a"}},
		StorageClassName: "fast",
		Capacity:         ptr.To(resource.MustParse("10Gi")),
	}
	assertErrs(t, r.Strategy.Validate(ctx, c), nil)

	bad := c.DeepCopy()
	bad.StorageClassName = "Fast_Class"
	bad.Capacity = ptr.To(resource.MustParse("-1Gi"))
	assertErrs(t, r.Strategy.Validate(ctx, bad), []fieldErr{{field.ErrorTypeInvalid, "storageClassName"}, {field.ErrorTypeInvalid, "capacity"}})

	resized := c.DeepCopy()
	resized.Capacity = ptr.To(resource.MustParse("5Gi"))
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, resized, c), nil)
	moved := c.DeepCopy()
	moved.StorageClassName = "slow"
	moved.NodeTopology = nil
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, moved, c), []fieldErr{{field.ErrorTypeInvalid, "nodeTopology"}, {field.ErrorTypeInvalid, "storageClassName"}})

	assertColumns(t, r, "Name", "Created At")
	if got, want := r.Printer.Row(c), []interface{}{"csisc-1", "2026-01-02T03:04:05Z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

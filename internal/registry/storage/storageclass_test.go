package storage

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestStorageClassDefault(t *testing.T) {
	r := findResource(t, "storageclasses")
	if !reflect.DeepEqual(r.ShortNames, []string{"sc"}) || r.Namespaced {
		t.Errorf("identity = %+v", r)
	}
	sc := &storagev1.StorageClass{Provisioner: "example.com/disk"}
	r.Strategy.Default(sc)
	if got := ptr.Deref(sc.ReclaimPolicy, ""); got != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaimPolicy = %q, want Delete", got)
	}
	if got := ptr.Deref(sc.VolumeBindingMode, ""); got != storagev1.VolumeBindingImmediate {
		t.Errorf("volumeBindingMode = %q, want Immediate", got)
	}
	kept := &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	r.Strategy.Default(kept)
	if *kept.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *kept.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("defaulting overwrote set fields: %v %v", *kept.ReclaimPolicy, *kept.VolumeBindingMode)
	}
}

func TestStorageClassValidate(t *testing.T) {
	r := findResource(t, "storageclasses")
	topology := func(key string, values ...string) corev1.TopologySelectorTerm {
		return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}
	}
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []fieldErr
	}{
		{"valid", func(*storagev1.StorageClass) {}, nil},
		{"no provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "" }, []fieldErr{{field.ErrorTypeRequired, "provisioner"}}},
		{"bad provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "a/b/c" }, []fieldErr{{field.ErrorTypeInvalid, "provisioner"}}},
		{"empty parameter key", func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "x"} },
			[]fieldErr{{field.ErrorTypeInvalid, "parameters"}}},
		{"bad reclaim policy", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRecycle) },
			[]fieldErr{{field.ErrorTypeNotSupported, "reclaimPolicy"}}},
		{"bad binding mode", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingMode("Later")) },
			[]fieldErr{{field.ErrorTypeNotSupported, "volumeBindingMode"}}},
		{"topology without values", func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{topology("topology.kubernetes.io/zone")}
		}, []fieldErr{{field.ErrorTypeRequired, "allowedTopologies[0].matchLabelExpressions[0].values"}}},
		{"duplicate topology term", func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{topology("zone", "a"), topology("zone", "a")}
		}, []fieldErr{{field.ErrorTypeDuplicate, "allowedTopologies[1].matchLabelExpressions"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/disk"}
			tt.mutate(sc)
			r.Strategy.Default(sc)
			assertErrs(t, r.Strategy.Validate(ctx, sc), tt.want)
		})
	}
}

func TestStorageClassUpdate(t *testing.T) {
	r := findResource(t, "storageclasses")
	old := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/disk",
		Parameters: map[string]string{"type": "ssd"}}
	r.Strategy.Default(old)
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []fieldErr
	}{
		{"allowVolumeExpansion may change", func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(true) }, nil},
		{"parameters", func(sc *storagev1.StorageClass) { sc.Parameters["type"] = "hdd" }, []fieldErr{{field.ErrorTypeForbidden, "parameters"}}},
		{"provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "example.com/other" }, []fieldErr{{field.ErrorTypeForbidden, "provisioner"}}},
		{"reclaimPolicy", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) },
			[]fieldErr{{field.ErrorTypeForbidden, "reclaimPolicy"}}},
		{"volumeBindingMode", func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, []fieldErr{{field.ErrorTypeInvalid, "volumeBindingMode"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := old.DeepCopy()
			tt.mutate(sc)
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, sc, old), tt.want)
		})
	}
}

func TestStorageClassPrint(t *testing.T) {
	r := findResource(t, "storageclasses")
	assertColumns(t, r, "Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age")
	tests := []struct {
		name string
		sc   storagev1.StorageClass
		want []interface{}
	}{
		{"unset fields print their defaults", storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: "standard", CreationTimestamp: threeDaysAgo}, Provisioner: "example.com/disk",
		}, []interface{}{"standard", "example.com/disk", "Delete", "Immediate", false, "3d"}},
		{"default class", storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: "local-path", CreationTimestamp: threeDaysAgo,
				Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: "rancher.io/local-path", ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), AllowVolumeExpansion: ptr.To(true),
		}, []interface{}{"local-path (default)", "rancher.io/local-path", "Retain", "WaitForFirstConsumer", true, "3d"}},
		{"beta default annotation", storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: threeDaysAgo,
				Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}},
			Provisioner: "p",
		}, []interface{}{"old (default)", "p", "Delete", "Immediate", false, "3d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Printer.Row(&tt.sc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

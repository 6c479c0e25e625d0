package storage

import (
	"reflect"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestVolumeAttributesClassValidate(t *testing.T) {
	r := findResource(t, "volumeattributesclasses")
	if !reflect.DeepEqual(r.ShortNames, []string{"vac"}) || r.Namespaced || r.HasStatus {
		t.Errorf("identity = %+v", r)
	}
	meta := metav1.ObjectMeta{Name: "gold"}
	tests := []struct {
		name string
		vac  storagev1.VolumeAttributesClass
		want []fieldErr
	}{
		{"valid", storagev1.VolumeAttributesClass{ObjectMeta: meta, DriverName: "csi.example.com", Parameters: map[string]string{"iops": "5000"}}, nil},
		{"no driver", storagev1.VolumeAttributesClass{ObjectMeta: meta, Parameters: map[string]string{"iops": "5000"}},
			[]fieldErr{{field.ErrorTypeRequired, "driverName"}}},
		{"driver not a qualified name", storagev1.VolumeAttributesClass{ObjectMeta: meta, DriverName: "csi example", Parameters: map[string]string{"iops": "5000"}},
			[]fieldErr{{field.ErrorTypeInvalid, "driverName"}}},
		{"no parameters", storagev1.VolumeAttributesClass{ObjectMeta: meta, DriverName: "csi.example.com"},
			[]fieldErr{{field.ErrorTypeRequired, "parameters"}}},
		{"empty parameter name", storagev1.VolumeAttributesClass{ObjectMeta: meta, DriverName: "csi.example.com", Parameters: map[string]string{"": "x"}},
			[]fieldErr{{field.ErrorTypeInvalid, "parameters"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErrs(t, r.Strategy.Validate(ctx, tt.vac.DeepCopy()), tt.want)
		})
	}
}

func TestVolumeAttributesClassUpdate(t *testing.T) {
	r := findResource(t, "volumeattributesclasses")
	old := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com", Parameters: map[string]string{"iops": "5000"}}
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"gold": "updated"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, labelled, old), nil)
	params := old.DeepCopy()
	params.Parameters = map[string]string{"iops": "9000"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, params, old), []fieldErr{{field.ErrorTypeForbidden, "parameters"}})
	driver := old.DeepCopy()
	driver.DriverName = "other.example.com"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, driver, old), []fieldErr{{field.ErrorTypeForbidden, "driverName"}})
}

func TestVolumeAttributesClassPrint(t *testing.T) {
	r := findResource(t, "volumeattributesclasses")
	assertColumns(t, r, "Name", "DriverName", "Age")
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold", CreationTimestamp: threeDaysAgo}, DriverName: "csi.example.com"}
	if got, want := r.Printer.Row(vac), []interface{}{"gold", "csi.example.com", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

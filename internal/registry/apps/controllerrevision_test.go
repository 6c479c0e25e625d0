package apps

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newRevision() *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "db-7c9f", Namespace: "default"},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
		Revision:   2,
	}
}

func TestControllerRevisionValidate(t *testing.T) {
	r := ControllerRevisions()
	if r.HasStatus || r.Scale != nil || len(r.Categories) != 0 || r.Kind != "ControllerRevision" {
		t.Errorf("identity = %+v", r)
	}
	checkErrors(t, createErrors(r, newRevision()), nil)

	noData := newRevision()
	noData.Data = runtime.RawExtension{}
	checkErrors(t, createErrors(r, noData), []wantError{{"data", field.ErrorTypeRequired}})

	negative := newRevision()
	negative.Revision = -1
	checkErrors(t, createErrors(r, negative), []wantError{{"revision", field.ErrorTypeInvalid}})

	changed := newRevision()
	changed.Data = runtime.RawExtension{Raw: []byte(`{"spec":{"x":1}}`)}
	checkErrors(t, updateErrors(r, changed, newRevision()), []wantError{{"data", field.ErrorTypeInvalid}})
}

func TestControllerRevisionPrinter(t *testing.T) {
	p := ControllerRevisions().Printer
	if got := columnNames(p); !reflect.DeepEqual(got, []string{"Name", "Controller", "Revision", "Age"}) {
		t.Errorf("columns = %v", got)
	}
	owned := newRevision()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "u1", Controller: ptr(true)}}
	checkRow(t, p, owned, 3, []interface{}{"db-7c9f", "statefulset.apps/db", int64(2)})

	orphan := newRevision()
	checkRow(t, p, orphan, 3, []interface{}{"db-7c9f", "<none>", int64(2)})
}

package node

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/registrytest"
)

func TestRuntimeClassValidate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "runtimeclasses")
	if r.Namespaced || r.GroupVersion.String() != "node.k8s.io/v1" || r.Kind != "RuntimeClass" {
		t.Fatalf("identity = %+v", r)
	}
	meta := metav1.ObjectMeta{Name: "gvisor"}
	tests := []struct {
		name string
		rc   nodev1.RuntimeClass
		want []registrytest.FieldErr
	}{
		{"valid", nodev1.RuntimeClass{ObjectMeta: meta, Handler: "runsc",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "true"},
				Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists}}}}, nil},
		{"no handler", nodev1.RuntimeClass{ObjectMeta: meta}, []registrytest.FieldErr{{field.ErrorTypeInvalid, "handler"}}},
		{"handler not a DNS label", nodev1.RuntimeClass{ObjectMeta: meta, Handler: "Run_C"}, []registrytest.FieldErr{{field.ErrorTypeInvalid, "handler"}}},
		{"negative overhead", nodev1.RuntimeClass{ObjectMeta: meta, Handler: "runc",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}}},
			[]registrytest.FieldErr{{field.ErrorTypeInvalid, "overhead.podFixed[memory]"}}},
		{"bad node selector", nodev1.RuntimeClass{ObjectMeta: meta, Handler: "runc",
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"a b": "c"}}},
			[]registrytest.FieldErr{{field.ErrorTypeInvalid, "scheduling.nodeSelector"}}},
		{"duplicate toleration", nodev1.RuntimeClass{ObjectMeta: meta, Handler: "runc",
			Scheduling: &nodev1.Scheduling{Tolerations: []corev1.Toleration{{Key: "a", Value: "b"}, {Key: "a", Value: "b"}}}},
			[]registrytest.FieldErr{{field.ErrorTypeDuplicate, "scheduling.tolerations[1]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registrytest.AssertErrs(t, r.Strategy.Validate(context.Background(), &tt.rc), tt.want)
		})
	}
}

func TestRuntimeClassUpdate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "runtimeclasses")
	old := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Handler: "runc"}
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(context.Background(), relabelled, old), nil)
	handler := old.DeepCopy()
	handler.Handler = "crun"
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(context.Background(), handler, old),
		[]registrytest.FieldErr{{field.ErrorTypeInvalid, "handler"}})
}

func TestRuntimeClassPrint(t *testing.T) {
	r := registrytest.Find(t, Resources(), "runtimeclasses")
	registrytest.AssertColumns(t, r, "Name", "Handler", "Age")
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", CreationTimestamp: registrytest.ThreeDaysAgo()}, Handler: "runsc"}
	if got, want := r.Printer.Row(rc), []interface{}{"gvisor", "runsc", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

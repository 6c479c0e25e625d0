package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
	"mizzen/internal/registry/catalog"
)

// TestObjectFieldsAreTheResourcesFields: for every built-in resource, an object's
// field pairs hold exactly what the resource's Fields and the object's metadata say,
// and a field selector on each of them matches the object.
func TestObjectFieldsAreTheResourcesFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler",
			ServiceAccountName: "sa", HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}, NominatedNodeName: "node-2"}}
	check := func(r *registry.Resource, obj runtime.Object) {
		t.Helper()
		want := fields.Set{}
		if r.Fields != nil {
			for k, v := range r.Fields(obj) {
				want[k] = v
			}
		}
		acc, _ := meta.Accessor(obj)
		want["metadata.name"] = acc.GetName()
		if r.Namespaced {
			want["metadata.namespace"] = acc.GetNamespace()
		}
		got := objectFields(r, obj)
		if len(got) != 2*len(want) {
			t.Errorf("%s: fields %v, want %v", r.Resource, got, want)
		}
		for k, v := range want {
			if gv, ok := got.Lookup(k); !ok || gv != v {
				t.Errorf("%s: field %s = %q (found %v), want %q", r.Resource, k, gv, ok, v)
			}
			if !fields.OneTermEqualSelector(k, v).Matches(got) {
				t.Errorf("%s: %s=%s does not select the object", r.Resource, k, v)
			}
		}
	}
	for _, r := range catalog.All() {
		obj := r.New()
		acc, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		acc.SetName("n")
		if r.Namespaced {
			acc.SetNamespace("ns")
		}
		check(r, obj)
		if r.GroupVersionResource() == corev1.SchemeGroupVersion.WithResource("pods") {
			check(r, pod)
		}
	}
}

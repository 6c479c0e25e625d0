package priority

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

// versionedStore is a reader whose list version changes with every Add, counting lists.
type versionedStore struct {
	*admissiontest.Store
	version, lists int
}

func (s *versionedStore) Add(obj runtime.Object) { s.Store.Add(obj); s.version++ }
func (s *versionedStore) List(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error) {
	s.lists++
	return s.Store.List(ctx, gvr, ns)
}
func (s *versionedStore) ListVersion(context.Context, schema.GroupVersionResource, string) (string, error) {
	return fmt.Sprint(s.version), nil
}

func createPod(t *testing.T, p *Plugin) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	a := &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "ns", Name: "p", Object: pod}
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestDefaultClassFollowsTheList: pod creates find the global default class without
// listing the classes again while they do not change, and see a new default at once.
func TestDefaultClassFollowsTheList(t *testing.T) {
	store := &versionedStore{Store: admissiontest.New(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10})}
	p := New(store)
	for range 3 {
		if pod := createPod(t, p); pod.Spec.PriorityClassName != "" || *pod.Spec.Priority != 0 {
			t.Fatalf("pod = %q %d, want no class and priority 0", pod.Spec.PriorityClassName, *pod.Spec.Priority)
		}
	}
	if store.lists != 1 {
		t.Errorf("classes listed %d times for 3 creates, want once", store.lists)
	}
	store.Add(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000, GlobalDefault: true})
	if pod := createPod(t, p); pod.Spec.PriorityClassName != "high" || *pod.Spec.Priority != 1000 {
		t.Errorf("pod = %q %d, want the new default high 1000", pod.Spec.PriorityClassName, *pod.Spec.Priority)
	}
}

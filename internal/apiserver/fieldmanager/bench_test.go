package fieldmanager_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/registry/catalog"
)

// benchPod is a defaulted pod like the ones bench/apiserver creates.
func benchPod(b *testing.B) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "bench", "tier": "backend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	for _, r := range catalog.All() {
		if r.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Pod") {
			r.Strategy.Default(pod)
		}
	}
	return pod
}

// BenchmarkTrackCreate is what field tracking adds to a pod's create.
func BenchmarkTrackCreate(b *testing.B) {
	m := newManagers(b)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	pod := benchPod(b)
	m.Update(podGVK, "", &corev1.Pod{}, pod.DeepCopy(), "warm")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Update(podGVK, "", &corev1.Pod{}, pod.DeepCopy(), "bench")
	}
}

// BenchmarkTrackCreateFast is the same through Create, the apiserver's path for creates.
func BenchmarkTrackCreateFast(b *testing.B) {
	benchCreate(b, func(m *fieldmanager.Managers, gvk schema.GroupVersionKind, live, obj k8sruntime.Object, manager string) (k8sruntime.Object, bool) {
		return m.Create(gvk, live, obj, manager), true
	})
}

// BenchmarkTrackCreateValueWalk is Create through its walk of the object as
// structured-merge-diff's reflective value (what Create did before it walked the Go
// object itself), for comparison.
func BenchmarkTrackCreateValueWalk(b *testing.B) {
	benchCreate(b, (*fieldmanager.Managers).CreateValueWalk)
}

// benchCreate measures create's field tracking of the bench pod through create.
func benchCreate(b *testing.B, create func(*fieldmanager.Managers, schema.GroupVersionKind, k8sruntime.Object, k8sruntime.Object, string) (k8sruntime.Object, bool)) {
	m := newManagers(b)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	pod := benchPod(b)
	create(m, podGVK, &corev1.Pod{}, pod.DeepCopy(), "warm")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := create(m, podGVK, &corev1.Pod{}, pod.DeepCopy(), "bench"); !ok {
			b.Fatal("the create's walk declined")
		}
	}
}

// BenchmarkTrackStatusUpdate is what it adds to a kubelet-like status update.
func BenchmarkTrackStatusUpdate(b *testing.B) {
	m := newManagers(b)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	live := m.Update(podGVK, "", &corev1.Pod{}, benchPod(b), "creator").(*corev1.Pod)
	live.UID = "u"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := live.DeepCopy()
		next.Status.Phase = corev1.PodRunning
		m.Update(podGVK, "status", live, next, "kubelet")
	}
}

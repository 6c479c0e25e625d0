package statefulset

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// settle syncs and plays the kubelet until every pod exists and is ready.
func (w *world) settle(replicas int) {
	w.t.Helper()
	for range 2*replicas + 2 {
		w.sync()
		w.kubelet()
	}
	if got := len(w.pods()); got != replicas {
		w.t.Fatalf("%d pods after settling, want %d", got, replicas)
	}
}

// updateImage changes the template, starting a rollout.
func (w *world) updateImage(image string) {
	w.t.Helper()
	s := w.set()
	s.Spec.Template.Spec.Containers[0].Image = image
	if _, err := w.client.AppsV1().StatefulSets("default").Update(w.ctx, s, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// rollOut returns the pods each sync took down (highest ordinal first), one batch per
// sync that deleted any, playing the kubelet after every sync, until every pod runs
// image.
func (w *world) rollOut(replicas int, image string) [][]string {
	w.t.Helper()
	var batches [][]string
	for range 4*replicas + 2 {
		before := w.podNames()
		w.sync()
		var batch []string
		for _, name := range slices.Backward(before) {
			if !slices.Contains(w.podNames(), name) {
				batch = append(batch, name)
			}
		}
		if len(batch) > 0 {
			batches = append(batches, batch)
		}
		w.kubelet()
	}
	for _, p := range w.pods() {
		if p.Spec.Containers[0].Image != image {
			w.t.Fatalf("%s still runs %s after the rollout", p.Name, p.Spec.Containers[0].Image)
		}
	}
	if got := len(w.pods()); got != replicas {
		w.t.Fatalf("%d pods after the rollout, want %d", got, replicas)
	}
	return batches
}

func TestRollingUpdateMaxUnavailable(t *testing.T) {
	tests := []struct {
		story          string
		replicas       int32
		policy         appsv1.PodManagementPolicyType
		maxUnavailable *intstr.IntOrString
		want           string
	}{
		{"unset: one at a time", 3, appsv1.ParallelPodManagement, nil, "[[db-2] [db-1] [db-0]]"},
		{"two at a time, highest ordinals first", 5, appsv1.ParallelPodManagement, ptr(intstr.FromInt32(2)),
			"[[db-4 db-3] [db-2 db-1] [db-0]]"},
		{"a percentage rounds up", 5, appsv1.ParallelPodManagement, ptr(intstr.FromString("50%")),
			"[[db-4 db-3 db-2] [db-1 db-0]]"},
		{"OrderedReady takes down a batch, then recreates it in order", 4, appsv1.OrderedReadyPodManagement, ptr(intstr.FromInt32(2)),
			"[[db-3 db-2] [db-1 db-0]]"},
		{"more than the replicas takes everything down at once", 2, appsv1.ParallelPodManagement, ptr(intstr.FromInt32(5)),
			"[[db-1 db-0]]"},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			s := newSet(tt.replicas, "db:1")
			s.Spec.PodManagementPolicy = tt.policy
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: tt.maxUnavailable}
			w := newWorld(t, s)
			w.settle(int(tt.replicas))
			w.updateImage("db:2")
			if got := fmt.Sprint(w.rollOut(int(tt.replicas), "db:2")); got != tt.want {
				t.Errorf("pods taken down %s, want %s", got, tt.want)
			}
		})
	}
}

// Pods already unavailable use up the budget.
func TestRollingUpdateCountsUnavailablePods(t *testing.T) {
	s := newSet(5, "db:1")
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr(intstr.FromInt32(2))}
	w := newWorld(t, s)
	w.settle(5)
	sick, err := w.client.CoreV1().Pods("default").Get(w.ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sick.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := w.client.CoreV1().Pods("default").UpdateStatus(w.ctx, sick, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.updateImage("db:2")
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0", "db-1", "db-2", "db-3"}) {
		t.Errorf("pods %v, want only db-4 taken down while db-1 is not ready", got)
	}
}

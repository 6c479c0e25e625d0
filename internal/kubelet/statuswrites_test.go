package kubelet

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

// statusPuts counts the client's writes of pods/status.
func statusPuts(c *k8sfake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "pods" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// A status is written once per change: not again because the runtime's times carry
// nanoseconds the API drops, and not again while the watch has yet to deliver the
// write (the next sync compares with what was written).
func TestStatusIsWrittenOncePerChange(t *testing.T) {
	ctx := context.Background()
	started := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: "7"},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}}
	client := k8sfake.NewClientset(pod)
	kl := &Kubelet{client: client, statusWrites: newStatusWrites()}

	// The same status from the runtime, with the start time's nanoseconds: no write.
	same := *pod.Status.DeepCopy()
	same.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(started.Add(123456789))
	if err := kl.writeStatus(ctx, kl.statusWrites.current(pod), same); err != nil {
		t.Fatal(err)
	}
	if n := statusPuts(client); n != 0 {
		t.Fatalf("%d status writes for a status that did not change, want 0", n)
	}

	// A change: one write. The watch still has the old pod; syncs in between write
	// nothing, and see the written status.
	ready := *pod.Status.DeepCopy()
	ready.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(started.Add(1500 * time.Millisecond))}}
	for range 3 {
		cur := kl.statusWrites.current(pod)
		if err := kl.writeStatus(ctx, cur, ready); err != nil {
			t.Fatal(err)
		}
	}
	if n := statusPuts(client); n != 1 {
		t.Fatalf("%d status writes for one change, want 1", n)
	}
	cur := kl.statusWrites.current(pod)
	if len(cur.Status.Conditions) != 1 || cur.Status.Conditions[0].LastTransitionTime.Time != started.Add(time.Second) {
		t.Errorf("a sync before the watch delivers the write sees conditions %v, want the written one", cur.Status.Conditions)
	}

	// The watch delivers a newer pod (here: the same version with the written status,
	// as the fake keeps resourceVersions): the kubelet works from it again.
	delivered := pod.DeepCopy()
	delivered.Status = cur.Status
	if got := kl.statusWrites.current(delivered); got != delivered {
		t.Error("once the watch has the written status, the watch's pod is current")
	}
	if got := kl.statusWrites.current(pod); got != pod {
		t.Error("a record outlived the watch's catching up")
	}
}

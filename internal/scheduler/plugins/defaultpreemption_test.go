package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"mizzen/internal/scheduler/framework"
)

// TestPreemptionRunsAfterTheCycle: PostFilter nominates the node at once and the
// victims are deleted afterwards; meanwhile the preemptor is not preempted for again
// (its victims are still in the snapshot), and it is activated when the calls end.
func TestPreemptionRunsAfterTheCycle(t *testing.T) {
	prio := func(p *v1.Pod, v int32) *v1.Pod { p.Spec.Priority = &v; return p }
	victim := prio(mkPod("victim", 2000, 0, "n1"), 1)
	preemptor := prio(mkPod("p", 2000, 0, ""), 100)
	h := newHandle([]*v1.Node{mkNode("n1", 2000, 4096)}, []*v1.Pod{victim})
	client := fake.NewClientset(victim.DeepCopy())
	release := make(chan struct{})
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	h.client = client
	h.recorder = events.NewFakeRecorder(10)
	h.activated = make(chan *v1.Pod, 1)
	fit, _ := NewNodeResourcesFit(nil, h)
	h.filters = []framework.FilterPlugin{fit.(framework.FilterPlugin)}
	h.pre = []framework.PreFilterPlugin{fit.(framework.PreFilterPlugin)}
	pl, err := NewDefaultPreemption(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	postFilter := func() (*framework.PostFilterResult, *framework.Status) {
		state := framework.NewCycleState()
		fit.(framework.PreFilterPlugin).PreFilter(context.Background(), state, preemptor)
		return pl.(framework.PostFilterPlugin).PostFilter(context.Background(), state, preemptor,
			map[string]*framework.Status{"n1": framework.NewStatus(framework.Unschedulable, "Insufficient cpu")})
	}

	res, st := postFilter()
	if res == nil || res.NominatedNodeName != "n1" {
		t.Fatalf("PostFilter: %+v %v, want n1 nominated", res, st)
	}
	res, st = postFilter()
	if res != nil || st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), msgRunning) {
		t.Fatalf("second PostFilter while the victims' calls run: %+v %v, want %q", res, st, msgRunning)
	}
	close(release)
	select {
	case p := <-h.activated:
		if p.UID != types.UID("p") {
			t.Fatalf("activated %s, want the preemptor", p.Name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the preemptor was never activated")
	}
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "victim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the victim is still there: %v", err)
	}
	got, _ := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if len(got.Items) != 0 {
		t.Fatalf("pods left: %d", len(got.Items))
	}

	// Activated before the cache has seen the deletion (the snapshot still has the
	// victim, not terminating): the preemptor waits instead of preempting again.
	res, st = postFilter()
	if res != nil || st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), msgTerminatingOnNom) {
		t.Fatalf("PostFilter before the cache saw the victim go: %+v %v, want %q", res, st, msgTerminatingOnNom)
	}
	// Once the cache shows it terminating, the nominated-node check waits for it.
	now := metav1.Now()
	ni, err := h.snapshot.NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ni.Pods {
		p.Pod.DeletionTimestamp = &now
	}
	preemptor.Status.NominatedNodeName = "n1"
	res, st = postFilter()
	if res != nil || st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), msgTerminatingOnNom) {
		t.Fatalf("PostFilter with the victim terminating: %+v %v, want %q", res, st, msgTerminatingOnNom)
	}
}

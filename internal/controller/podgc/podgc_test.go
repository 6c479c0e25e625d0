package podgc

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		CreationTimestamp: metav1.NewTime(epoch)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func onNode(n string) podOpt          { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func createdAt(minute int) podOpt {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(minute) * time.Minute))
	}
}
func terminating() podOpt {
	return func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
}

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func nodeWith(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := node(name)
	n.Spec.Taints = taints
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	return n
}

func TestPodGC(t *testing.T) {
	tests := []struct {
		story       string
		threshold   int
		nodes       []*corev1.Node
		pods        []*corev1.Pod
		wantDeleted []string
		wantFailed  []string // pods marked Failed before deletion
	}{
		{
			story: "terminated pods beyond the threshold go, oldest first", threshold: 2,
			nodes: []*corev1.Node{node("n1")},
			pods: []*corev1.Pod{
				pod("done-3", onNode("n1"), phase(corev1.PodSucceeded), createdAt(3)),
				pod("done-1", onNode("n1"), phase(corev1.PodFailed), createdAt(1)),
				pod("done-2", onNode("n1"), phase(corev1.PodSucceeded), createdAt(2)),
				pod("done-4", onNode("n1"), phase(corev1.PodSucceeded), createdAt(4)),
				pod("running-0", onNode("n1"), createdAt(0)),
			},
			wantDeleted: []string{"done-1", "done-2"},
		},
		{
			story: "at the threshold nothing is collected", threshold: 2,
			nodes: []*corev1.Node{node("n1")},
			pods: []*corev1.Pod{
				pod("done-1", onNode("n1"), phase(corev1.PodSucceeded)),
				pod("done-2", onNode("n1"), phase(corev1.PodFailed)),
			},
		},
		{
			story: "pods on a node that no longer exists are failed and deleted", threshold: 100,
			nodes: []*corev1.Node{node("n1")},
			pods: []*corev1.Pod{
				pod("alive", onNode("n1")),
				pod("orphan", onNode("gone")),
				pod("orphan-done", onNode("gone"), phase(corev1.PodSucceeded)),
			},
			wantDeleted: []string{"orphan", "orphan-done"},
			wantFailed:  []string{"orphan"},
		},
		{
			story: "terminating pods on a not-ready node tainted out-of-service are finished off", threshold: 100,
			nodes: []*corev1.Node{
				nodeWith("dead", corev1.ConditionUnknown, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}),
				nodeWith("down", corev1.ConditionFalse),
				nodeWith("back", corev1.ConditionTrue, corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}),
			},
			pods: []*corev1.Pod{
				pod("stuck-on-dead", onNode("dead"), terminating()),
				pod("running-on-dead", onNode("dead")),
				pod("stuck-on-down", onNode("down"), terminating()),
				pod("stuck-on-back", onNode("back"), terminating()),
			},
			wantDeleted: []string{"stuck-on-dead"},
			wantFailed:  []string{"stuck-on-dead"},
		},
		{
			story: "an unscheduled terminating pod is finished off; a pending one is not", threshold: 100,
			pods:        []*corev1.Pod{pod("stuck", terminating(), phase(corev1.PodPending)), pod("waiting", phase(corev1.PodPending))},
			wantDeleted: []string{"stuck"},
			wantFailed:  []string{"stuck"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tt.nodes {
				objs = append(objs, n)
			}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			client := fake.NewClientset(objs...)
			inf := informers.NewSharedInformerFactory(client, 0)
			c := New(client, inf.Core().V1().Pods(), inf.Core().V1().Nodes(), tt.threshold)
			for _, n := range tt.nodes {
				inf.Core().V1().Nodes().Informer().GetIndexer().Add(n)
			}
			for _, p := range tt.pods {
				inf.Core().V1().Pods().Informer().GetIndexer().Add(p)
			}
			client.ClearActions()
			if err := c.sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			var deleted, failed []string
			for _, a := range client.Actions() {
				switch a := a.(type) {
				case clienttesting.DeleteAction:
					deleted = append(deleted, a.GetName())
					if gp := a.GetDeleteOptions().GracePeriodSeconds; gp == nil || *gp != 0 {
						t.Errorf("pod %s deleted with grace period %v, want 0", a.GetName(), gp)
					}
				case clienttesting.PatchAction:
					if a.GetSubresource() == "status" {
						failed = append(failed, a.GetName())
					}
				}
			}
			slices.Sort(deleted)
			slices.Sort(failed)
			if !slices.Equal(deleted, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", deleted, tt.wantDeleted)
			}
			if !slices.Equal(failed, tt.wantFailed) {
				t.Errorf("marked failed %v, want %v", failed, tt.wantFailed)
			}
			for _, name := range tt.wantFailed {
				if _, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{}); err == nil {
					t.Errorf("pod %s still exists", name)
				}
			}
		})
	}
}

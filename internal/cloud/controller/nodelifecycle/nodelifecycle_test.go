package nodelifecycle

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/fake"
)

func node(name string, ready v1.ConditionStatus, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}}}
}

func run(t *testing.T, p *fake.Provider, objs ...runtime.Object) (*k8sfake.Clientset, []string) {
	t.Helper()
	client := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, p, factory.Core().V1().Nodes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(10)
	c.Events = events
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	c.MonitorNodes(ctx)
	close(events.Events)
	var out []string
	for e := range events.Events {
		out = append(out, e)
	}
	return client, out
}

func TestGoneInstanceDeletesTheNode(t *testing.T) {
	p := &fake.Provider{Exists: map[string]bool{"gone": false, "ready-but-gone": false}}
	client, events := run(t, p, node("gone", v1.ConditionUnknown), node("ready-but-gone", v1.ConditionTrue), node("here", v1.ConditionFalse))
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node gone still exists: %v", err)
	}
	for _, keep := range []string{"ready-but-gone", "here"} {
		if _, err := client.CoreV1().Nodes().Get(context.Background(), keep, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s: %v (only nodes that are not Ready are checked)", keep, err)
		}
	}
	want := []string{"Normal DeletingNode Deleting node gone because it does not exist in the cloud provider"}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

func TestShutdownTaint(t *testing.T) {
	p := &fake.Provider{Shutdown: map[string]bool{"off": true, "back": true}}
	client, _ := run(t, p, node("off", v1.ConditionUnknown), node("back", v1.ConditionTrue, ShutdownTaint))
	off, _ := client.CoreV1().Nodes().Get(context.Background(), "off", metav1.GetOptions{})
	if len(off.Spec.Taints) != 1 || off.Spec.Taints[0].Key != cloud.TaintNodeShutdown || off.Spec.Taints[0].Effect != v1.TaintEffectNoSchedule {
		t.Errorf("shut down node's taints %v, want %s:NoSchedule", off.Spec.Taints, cloud.TaintNodeShutdown)
	}
	back, _ := client.CoreV1().Nodes().Get(context.Background(), "back", metav1.GetOptions{})
	if len(back.Spec.Taints) != 0 {
		t.Errorf("a Ready node keeps taints %v", back.Spec.Taints)
	}
}

func TestExcludedNodeIsLeftAlone(t *testing.T) {
	n := node("gone", v1.ConditionUnknown)
	n.Labels = map[string]string{cloud.LabelNodeLifecycleExclude: "true"}
	client, _ := run(t, &fake.Provider{Exists: map[string]bool{"gone": false}}, n)
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "gone", metav1.GetOptions{}); err != nil {
		t.Errorf("an excluded node was deleted: %v", err)
	}
}

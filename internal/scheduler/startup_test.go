package scheduler

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A scheduler that starts with pods already bound and pods pending must count the
// bound ones before it places any pending one: here every node is full, so no pending
// pod may be bound (scheduling before the informers' handlers had seen every bound
// pod overfilled nodes when a scheduler restarted with pods pending).
func TestStartWithBoundAndPendingPods(t *testing.T) {
	var objs []runtime.Object
	for i := range 200 {
		n := fmt.Sprintf("n%03d", i)
		objs = append(objs, node(n, 1000, 1024), pod("bound-"+n, 1000, 100, onNode(n)))
	}
	for i := range 20 {
		objs = append(objs, pod(fmt.Sprintf("pending-%02d", i), 500, 100))
	}
	e := startScheduler(t, nil, objs...)
	for i := range 20 {
		e.waitUnschedulable("default", fmt.Sprintf("pending-%02d", i))
	}
	pods, err := e.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Name[:len("pending")] == "pending" {
			t.Errorf("pod %s was bound to %s, which a bound pod fills", p.Name, p.Spec.NodeName)
		}
	}
}

package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"
)

// gate holds the fake apiserver's answers to matching calls until opened.
type gate struct {
	once    sync.Once
	open    chan struct{}
	reached chan struct{} // closed at the first held call
	seen    sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{}), reached: make(chan struct{})} }

func (g *gate) hold() {
	g.seen.Do(func() { close(g.reached) })
	<-g.open
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// prependReactor adds a reactor in front of the others while the scheduler runs.
func prependReactor(client *fake.Clientset, verb, resource string, fn clienttesting.ReactionFunc) {
	client.Lock()
	defer client.Unlock()
	client.PrependReactor(verb, resource, fn)
}

// holdingClient passes the scheduler's pod calls to the fake clientset, first calling
// before (the fake serializes every call under one lock, so a call cannot be held
// inside a reactor without holding them all).
type holdingClient struct {
	kubernetes.Interface
	before func(verb, name, subresource string)
}

func (c holdingClient) CoreV1() corev1client.CoreV1Interface {
	return holdingCore{c.Interface.CoreV1(), c.before}
}

type holdingCore struct {
	corev1client.CoreV1Interface
	before func(verb, name, subresource string)
}

func (c holdingCore) Pods(ns string) corev1client.PodInterface {
	return holdingPods{c.CoreV1Interface.Pods(ns), c.before}
}

type holdingPods struct {
	corev1client.PodInterface
	before func(verb, name, subresource string)
}

func (p holdingPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	p.before("patch", name, strings.Join(subresources, "/"))
	return p.PodInterface.Patch(ctx, name, pt, data, opts, subresources...)
}

func (p holdingPods) Bind(ctx context.Context, binding *v1.Binding, opts metav1.CreateOptions) error {
	p.before("create", binding.Name, "binding")
	return p.PodInterface.Bind(ctx, binding, opts)
}

func (p holdingPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	p.before("delete", name, "")
	return p.PodInterface.Delete(ctx, name, opts)
}

// A failed attempt's status patch is made outside the scheduling loop: while it hangs,
// other pods are still placed, and it lands once the apiserver answers.
func TestStatusPatchDoesNotHoldTheLoop(t *testing.T) {
	client := fake.NewClientset(node("n1", 1000, 4096))
	g := newGate()
	t.Cleanup(g.release)
	env := startSchedulerThrough(t, client, holdingClient{client, func(verb, name, sub string) {
		if verb == "patch" && sub == "status" && name == "too-big" {
			g.hold()
		}
	}}, nil)
	env.createPod(pod("too-big", 2000, 0))
	<-g.reached
	env.createPod(pod("fits", 500, 0))
	if n := env.waitScheduled("default", "fits"); n != "n1" {
		t.Errorf("fits placed on %q", n)
	}
	g.release()
	if _, msg := env.waitUnschedulable("default", "too-big"); msg != "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.." {
		t.Errorf("too-big: %q", msg)
	}
}

// A preemption's victims are deleted after the cycle: while the delete hangs, other
// pods are placed; once it ends, the preemptor takes the victim's room.
func TestPreemptionDeletesDoNotHoldTheLoop(t *testing.T) {
	client := fake.NewClientset(
		node("n1", 1000, 4096), node("n2", 1000, 4096),
		pod("low", 1000, 0, onNode("n1"), withPriority(1)),
		pod("other", 600, 0, onNode("n2"), withPriority(1000)),
	)
	g := newGate()
	t.Cleanup(g.release)
	env := startSchedulerThrough(t, client, holdingClient{client, func(verb, _, _ string) {
		if verb == "delete" {
			g.hold()
		}
	}}, nil)
	env.createPod(pod("high", 1000, 0, withPriority(100)))
	<-g.reached
	env.createPod(pod("small", 300, 0))
	if n := env.waitScheduled("default", "small"); n != "n2" {
		t.Errorf("small placed on %q, want n2", n)
	}
	if p, err := client.CoreV1().Pods("default").Get(context.Background(), "high", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("high was bound before its victim was deleted: %v %v", p.Spec.NodeName, err)
	}
	// The victim is marked before its delete is sent, as upstream.
	low, err := client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marked := false
	for _, c := range low.Status.Conditions {
		marked = marked || (c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler)
	}
	if !marked {
		t.Errorf("victim's conditions %+v lack DisruptionTarget", low.Status.Conditions)
	}
	g.release()
	if n := env.waitScheduled("default", "high"); n != "n1" {
		t.Errorf("high placed on %q, want n1", n)
	}
	p, err := client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("victim low still exists: %v", p)
	}
}

// A victim whose delete fails is not lost: the preemptor is retried (upstream activates
// it when its async preemption fails), preempts again, and gets the room.
func TestPreemptionAfterFailedDelete(t *testing.T) {
	client := fake.NewClientset(
		node("n1", 1000, 4096),
		pod("low", 1000, 0, onNode("n1"), withPriority(1)),
	)
	env := startSchedulerWith(t, client, nil)
	var mu sync.Mutex
	deletes := 0
	prependReactor(client, "delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		deletes++
		if deletes == 1 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sad"))
		}
		return false, nil, nil
	})
	env.createPod(pod("high", 1000, 0, withPriority(100)))
	if n := env.waitScheduled("default", "high"); n != "n1" {
		t.Errorf("high placed on %q, want n1", n)
	}
	mu.Lock()
	if deletes < 2 {
		t.Errorf("%d delete calls, want the failed one and a second", deletes)
	}
	mu.Unlock()
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("victim low still exists: %v", err)
	}
}

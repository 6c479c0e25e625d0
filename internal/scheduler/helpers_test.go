package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"mizzen/internal/scheduler/config"
)

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

// testEnv is a scheduler running against client-go's fake clientset, with the
// pods/binding subresource emulated (the fake tracker does not implement it).
type testEnv struct {
	t      testing.TB
	client *fake.Clientset
	sched  *Scheduler
}

func startScheduler(t testing.TB, cfg *config.Configuration, objs ...runtime.Object) *testEnv {
	t.Helper()
	return startSchedulerWith(t, fake.NewClientset(objs...), cfg)
}

// startSchedulerWith runs the scheduler against a given fake clientset. Benchmarks pass
// the simple clientset, whose tracker does not rebuild a REST mapper on every write.
func startSchedulerWith(t testing.TB, client *fake.Clientset, cfg *config.Configuration) *testEnv {
	t.Helper()
	return startSchedulerThrough(t, client, client, cfg)
}

// startSchedulerThrough runs the scheduler with its API calls made through calls (a
// wrapper of client, e.g. one that holds some calls) and its informers on client.
func startSchedulerThrough(t testing.TB, client *fake.Clientset, calls kubernetes.Interface, cfg *config.Configuration) *testEnv {
	t.Helper()
	addBindingReactor(client)
	if cfg == nil {
		cfg = &config.Configuration{}
	}
	config.SetDefaults(cfg)
	if err := config.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	factory := informers.NewSharedInformerFactory(client, 0)
	sched, err := New(ctx, calls, factory, broadcaster, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// The informers have synced, but the scheduler's cache is filled by their event
	// handlers, which may still be running: a pod created now could meet an empty cache
	// ("no nodes available") instead of the nodes the test seeded.
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return sched.cache.NodeCount() >= len(nodes.Items), nil
	}); err != nil {
		t.Fatalf("the scheduler's cache never held the %d seeded nodes: %v", len(nodes.Items), err)
	}
	done := make(chan struct{})
	go func() {
		sched.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		broadcaster.Shutdown()
		factory.Shutdown()
	})
	return &testEnv{t: t, client: client, sched: sched}
}

const pollTimeout = 30 * time.Second

func (e *testEnv) createPod(pod *v1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) createNode(node *v1.Node) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitScheduled waits until the pod is bound and returns its node.
func (e *testEnv) waitScheduled(ns, name string) string {
	e.t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		e.t.Fatalf("pod %s/%s was not scheduled: %v", ns, name, err)
	}
	return node
}

// waitUnschedulable waits for the PodScheduled=False condition and returns its message.
func (e *testEnv) waitUnschedulable(ns, name string) (*v1.Pod, string) {
	e.t.Helper()
	var msg string
	var pod *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				msg, pod = c.Message, p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s/%s never got PodScheduled=False: %v", ns, name, err)
	}
	return pod, msg
}

// waitEvent waits for an event with reason about the pod and returns its note.
func (e *testEnv) waitEvent(ns, podName, reason string) string {
	e.t.Helper()
	var note string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == podName && ev.Reason == reason {
				note = ev.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("no %s event for %s/%s: %v", reason, ns, podName, err)
	}
	return note
}

// node builds a ready node with cpu (millicores), memory (Mi) and max pods.
func node(name string, milliCPU, memMi int64, opts ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{
				v1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(memMi*1024*1024, resource.BinarySI),
				v1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
			},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	n.Status.Capacity = n.Status.Allocatable
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabels(kv ...string) func(*v1.Node) {
	return func(n *v1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaint(key, value string, effect v1.TaintEffect) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withPodCapacity(n int64) func(*v1.Node) {
	return func(nd *v1.Node) {
		nd.Status.Allocatable[v1.ResourcePods] = *resource.NewQuantity(n, resource.DecimalSI)
	}
}

// pod builds a pending pod requesting cpu (millicores) and memory (Mi).
func pod(name string, milliCPU, memMi int64, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: v1.PodSpec{
			SchedulerName: config.DefaultSchedulerName,
			Containers: []v1.Container{{
				Name: "c", Image: "busybox",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}},
			}},
		},
	}
	if milliCPU > 0 {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)
	}
	if memMi > 0 {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(memMi*1024*1024, resource.BinarySI)
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.NodeName = n } }

func withPodLabels(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withPriority(prio int32) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Priority = &prio }
}

func keysOf(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}

func pollUntil(cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return cond()
	})
}

// addBindingReactor emulates the pods/binding subresource, which the fake tracker lacks.
func addBindingReactor(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := action.(clienttesting.CreateAction).GetObject().(*v1.Binding)
		obj, err := client.Tracker().Get(podsGVR, action.GetNamespace(), b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("pod %v is already assigned to node %q", b.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(podsGVR, pod, action.GetNamespace())
	})
}

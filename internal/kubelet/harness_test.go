package kubelet

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"mizzen/internal/cri/fake"
	"mizzen/internal/testing/lockedbuf"
)

const testNode = "node-1"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness runs a kubelet on the fake CRI runtime against a fake clientset, on a fake
// clock that the test advances while it polls.
type harness struct {
	t      *testing.T
	clock  *testclock.FakeClock
	rt     *fake.Runtime
	client *k8sfake.Clientset

	logs lockedbuf.Buffer // the kubelets' log, shown when the test fails

	mu       sync.Mutex
	watching chan struct{} // closed when the kubelet's pod watch is registered
	// listed is the tracker watch opened when the kubelet listed its pods, handed to
	// its watch that follows (see newHarness).
	listed watch.Interface
	// wrapWatch, if set, stands between the kubelet's pod watch and the tracker.
	wrapWatch func(watch.Interface) watch.Interface
	cancel    context.CancelFunc
	done      chan error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(epoch)
	h := &harness{
		t:      t,
		clock:  clk,
		rt:     fake.New(fake.Options{Clock: clk, RuntimeName: "containerd", RuntimeVersion: "1.6.20", RecordCalls: true}),
		client: k8sfake.NewSimpleClientset(),
	}
	// The fake tracker's watch from a resource version replays the objects changed
	// since but not the ones deleted, so a deletion between the kubelet's list and its
	// watch was lost (a restarted kubelet that deleted a pod it listed never saw it go,
	// and never removed its containers). As an
	// apiserver's watch starts at the list's revision, the kubelet's list opens the
	// tracker watch its watch then takes. Reactors run under the fake's lock, which
	// every write takes too, so nothing happens between the two.
	h.client.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		la := action.(clienttesting.ListActionImpl)
		if !strings.Contains(la.ListOptions.FieldSelector, "spec.nodeName") {
			return false, nil, nil // not the kubelet's list
		}
		// Without list options the tracker sends only later changes, each a copy (with
		// them it would also send its own stored objects, uncopied).
		w, err := h.client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		h.mu.Lock()
		if h.listed != nil {
			h.listed.Stop()
		}
		h.listed = w
		h.mu.Unlock()
		return false, nil, nil // the tracker answers the list itself
	})
	// The fake tracker leaves objects' resourceVersion empty; the kubelet tells the
	// watch's pod from its own last status write by it (statusWrites), so every write
	// of a pod gets a new one, as the apiserver gives. Without it a condition another
	// writer added (a readiness gate's) could be lost under the kubelet's last write.
	var podRV atomic.Int64
	h.client.PrependReactor("*", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case clienttesting.CreateAction:
			obj = a.GetObject()
		case clienttesting.UpdateAction:
			obj = a.GetObject()
		}
		if m, err := meta.Accessor(obj); obj != nil && err == nil {
			m.SetResourceVersion(strconv.FormatInt(podRV.Add(1), 10))
		}
		return false, nil, nil
	})
	// Register the kubelet's pod watch before the test creates pods.
	h.client.PrependWatchReactor("pods", func(action clienttesting.Action) (bool, watch.Interface, error) {
		h.mu.Lock()
		w := h.listed
		h.listed = nil
		h.mu.Unlock()
		if w == nil {
			wa := action.(clienttesting.WatchActionImpl)
			var err error
			if w, err = h.client.Tracker().Watch(action.GetResource(), action.GetNamespace(), wa.ListOptions); err != nil {
				return true, nil, err
			}
		}
		h.mu.Lock()
		if h.wrapWatch != nil {
			w = h.wrapWatch(w)
		}
		if h.watching != nil {
			close(h.watching)
			h.watching = nil
		}
		h.mu.Unlock()
		return true, w, nil
	})
	t.Cleanup(h.showLogsOnFailure)
	t.Cleanup(h.stop)
	return h
}

// logLinesShown bounds the kubelet log a failed test prints: its end, where the
// failure is.
const logLinesShown = 150

// showLogsOnFailure prints the end of the kubelets' log when the test has failed: a
// failure seen once under load (make test) is otherwise a bare timeout.
func (h *harness) showLogsOnFailure() {
	if !h.t.Failed() {
		return
	}
	lines := strings.Split(strings.TrimSpace(h.logs.String()), "\n")
	if len(lines) > logLinesShown {
		lines = lines[len(lines)-logLinesShown:]
	}
	h.t.Logf("the kubelet's log, last %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
}

func (h *harness) options() Options {
	rootDir := h.t.TempDir()
	// Cleanups run last registered first: stop the kubelet before its root
	// directory is removed, or a pod worker still writing a volume races the removal.
	h.t.Cleanup(h.stop)
	return Options{
		Client:   h.client,
		NodeName: testNode,
		Runtime:  h.rt.Client(),
		Images:   h.rt.Client(),
		NodeIP:   "10.0.0.5",
		Machine: &MachineInfo{CPUCores: 4, MemoryBytes: 8 << 30, EphemeralStorage: 100 << 30,
			KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)"},
		Clock:   h.clock,
		Logger:  slog.New(slog.NewTextHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RootDir: rootDir,
		NoTmpfs: true,
		// The fake runtime writes no log files, and the rotation's own ContainerStatus
		// calls would blur what tests count of the pod workers'.
		ContainerLogMaxSize: -1,
	}
}

// start runs a kubelet and waits until its pod watch is in place.
func (h *harness) start() {
	h.startWith(h.options())
}

func (h *harness) startWith(opts Options) {
	h.t.Helper()
	watching := make(chan struct{})
	h.mu.Lock()
	h.watching = watching
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- Run(ctx, opts) }()
	select {
	case <-watching:
	case err := <-h.done:
		h.t.Fatalf("kubelet exited: %v", err)
	case <-time.After(30 * time.Second):
		h.t.Fatal("kubelet never watched pods")
	}
}

// stop ends the running kubelet, if any, and waits for it.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("kubelet: %v", err)
	}
	h.cancel = nil
}

// eventually advances the clock a second at a time until cond holds.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		h.clock.Step(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
}

// waitReal polls cond for a few seconds of real time, the fake clock standing still.
func (h *harness) waitReal(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s at %v", what, h.clock.Now())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPodReal polls the pod in real time, the fake clock standing still, until cond
// holds, and returns it: a container set to exit after a while cannot exit meanwhile,
// however slowly the kubelet reports the state before.
func (h *harness) waitPodReal(name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	h.t.Helper()
	return h.pollPod(h.waitReal, name, what, cond)
}

func (h *harness) getPod(name string) (*v1.Pod, error) {
	return h.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
}

// waitPod polls the pod until cond holds and returns it, moving the clock (eventually).
func (h *harness) waitPod(name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	h.t.Helper()
	return h.pollPod(h.eventually, name, what, cond)
}

// pollPod reads the pod under wait until cond holds and returns the last read.
func (h *harness) pollPod(wait func(what string, cond func() bool), name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	h.t.Helper()
	var last *v1.Pod
	wait(what, func() bool {
		p, err := h.getPod(name)
		if err != nil {
			return false
		}
		last = p
		return cond(p)
	})
	return last
}

func (h *harness) createPod(pod *v1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// newPod is a pod bound to the test node with one container per name.
func newPod(name string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			NodeName:      testNode,
			RestartPolicy: v1.RestartPolicyAlways,
		},
		Status: v1.PodStatus{
			Phase:      v1.PodPending,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}},
		},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "registry.local/" + c + ":1.0"})
	}
	return p
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func conditionTrue(p *v1.Pod, t v1.PodConditionType) bool {
	c := condition(p, t)
	return c != nil && c.Status == v1.ConditionTrue
}

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// waitEvent waits for an event about the pod with this reason and returns its message.
func (h *harness) waitEvent(pod, reason string) string {
	h.t.Helper()
	msg := ""
	h.eventually("event "+reason+" for "+pod, func() bool {
		evs, err := h.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == pod && e.Reason == reason && e.Source.Component == "kubelet" && e.Source.Host == testNode {
				msg = e.Message
				return true
			}
		}
		return false
	})
	return msg
}

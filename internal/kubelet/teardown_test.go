package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/kubelet/podcgroups"
	"mizzen/internal/testing/lockedbuf"
)

// heldSandboxes is a CRI runtime on which the sandbox of a pod whose name has the
// prefix never finishes starting: RunPodSandbox returns only when its context ends,
// as a start stuck behind a loaded runtime (CNI, runc) would.
type heldSandboxes struct {
	cri.RuntimeService
	prefix string

	mu      sync.Mutex
	held    int           // calls that reached the runtime
	givenUp int           // calls whose context ended
	reached chan struct{} // closed by the first of them
}

func (r *heldSandboxes) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if !strings.HasPrefix(cfg.GetMetadata().GetName(), r.prefix) {
		return r.RuntimeService.RunPodSandbox(ctx, cfg, handler)
	}
	r.mu.Lock()
	if r.held++; r.held == 1 {
		close(r.reached)
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.givenUp++
	r.mu.Unlock()
	return "", ctx.Err()
}

// TestDeletedPodsDoNotHoldUpANewPod is the garbage collector's deletion of a
// ReplicationController's pods (grace period 0, as its pod template says) while many of
// them are still starting, followed by a new pod bound to the same node (conformance's
// [Serial] PreemptionExecutionPath after the Garbage collector specs). The deleted pods'
// starts must stop at once: the new pod starts while one of them is stuck for good in
// its sandbox start, holding the node's only start slot until its pod's deletion
// cancels it; and everything of the deleted pods is torn down.
func TestDeletedPodsDoNotHoldUpANewPod(t *testing.T) {
	h := newHarness(t)
	rt := &heldSandboxes{RuntimeService: h.rt.Client(), prefix: "starting-", reached: make(chan struct{})}
	opts := h.options()
	opts.Runtime = rt
	opts.ParallelStarts = 1
	h.startWith(opts)
	ctx := context.Background()

	rc := metav1.OwnerReference{APIVersion: "v1", Kind: "ReplicationController", Name: "simpletest-rc-to-be-deleted",
		UID: "uid-rc", Controller: ptr.To(true)}
	oldPod := func(name string) *v1.Pod {
		p := newPod(name, "nginx")
		p.OwnerReferences = []metav1.OwnerReference{rc}
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		return p
	}
	var old []string
	for i := range 3 {
		name := fmt.Sprintf("running-%d", i)
		h.createPod(oldPod(name))
		h.waitPod(name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
		old = append(old, name)
	}
	for i := range 12 {
		name := fmt.Sprintf("starting-%d", i)
		h.createPod(oldPod(name))
		old = append(old, name)
	}
	select {
	case <-rt.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("no sandbox start of the starting pods reached the runtime")
	}

	for _, name := range old {
		if err := h.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	h.createPod(newPod("without-label", "pause"))
	h.waitPod("without-label", "the new pod Running while a deleted pod's sandbox start is stuck", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning
	})
	t.Logf("the new pod ran %s after the old pods' deletion", time.Since(began).Round(time.Millisecond))

	h.eventually("the deleted pods' sandboxes and containers removed", func() bool {
		sbs, err := h.rt.Client().ListPodSandbox(ctx, nil)
		if err != nil {
			return false
		}
		cs, err := h.rt.Client().ListContainers(ctx, nil)
		if err != nil {
			return false
		}
		for _, sb := range sbs {
			if sb.GetMetadata().GetName() != "without-label" {
				return false
			}
		}
		for _, c := range cs {
			if c.GetLabels()[labelPodName] != "without-label" {
				return false
			}
		}
		return len(sbs) == 1 && len(cs) == 1
	})
}

// TestAbandonedSandboxStartLeavesNoPodCgroup is a pod deleted while its sandbox starts,
// whose runtime goes on with the start the kubelet gave up and makes the pod's cgroup
// after the kubelet has torn the pod down, as containerd's runc does. (Conformance's
// ServiceAccounts opt-out spec left three such cgroups: pods without volumes, so
// without a directory for the orphan sweep to find, deleted a second after their
// creation.) The sweep removes the late cgroup, then the pod's directory.
func TestAbandonedSandboxStartLeavesNoPodCgroup(t *testing.T) {
	h := newHarness(t)
	rt := &heldSandboxes{RuntimeService: h.rt.Client(), prefix: "starting-", reached: make(chan struct{})}
	opts := h.options()
	opts.Runtime = rt
	hierarchy := t.TempDir()
	opts.PodCgroups = podcgroups.New(hierarchy)
	h.startWith(opts)

	pod := newPod("starting-without-volumes", "app")
	h.createPod(pod)
	select {
	case <-rt.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the pod's sandbox start never reached the runtime")
	}
	if err := h.client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReal("the held sandbox start given up", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.givenUp == 1
	})
	// The kubelet tears the pod down as soon as its start is given up.
	for range 3 {
		h.clock.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	cgroup := filepath.Join(hierarchy, "kubepods", "besteffort", "pod"+string(pod.UID))
	if err := os.MkdirAll(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	h.eventually("the pod cgroup made after the teardown removed", func() bool {
		_, err := os.Stat(cgroup)
		return os.IsNotExist(err)
	})
	podDir := filepath.Join(opts.RootDir, "pods", string(pod.UID))
	h.eventually("the pod's directory removed", func() bool {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err)
	})
}

// vanishingPods is a CRI runtime on which a pod's sandbox, and its containers with it,
// are removed by someone else (crictl rmp -f, say) just as the kubelet stops its first
// container: the stop finds nothing, and answers NotFound.
type vanishingPods struct {
	cri.RuntimeService
	mu       sync.Mutex
	vanished int
}

func (r *vanishingPods) StopContainer(ctx context.Context, id string, timeout int64) error {
	cs, err := r.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err == nil && len(cs) == 1 {
		if err := r.RemovePodSandbox(ctx, cs[0].PodSandboxId); err == nil {
			r.mu.Lock()
			r.vanished++
			r.mu.Unlock()
		}
	}
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

// TestTeardownTakesNotFoundAsGone: a deleted pod whose sandbox and containers the
// runtime no longer has when the kubelet stops them is torn down at once, as upstream's
// kubelet takes the runtime's NotFound for "already stopped", not retried as a failed
// sync.
func TestTeardownTakesNotFoundAsGone(t *testing.T) {
	h := newHarness(t)
	rt := &vanishingPods{RuntimeService: h.rt.Client()}
	var logs lockedbuf.Buffer
	opts := h.options()
	opts.Runtime = rt
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.startWith(opts)
	ctx := context.Background()

	pod := newPod("simpletest", "nginx")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	h.createPod(pod)
	h.waitPod("simpletest", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if err := h.client.CoreV1().Pods("default").Delete(ctx, "simpletest", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the pod's sandbox gone", func() bool {
		sbs, err := h.rt.Client().ListPodSandbox(ctx, nil)
		return err == nil && len(sbs) == 0
	})
	// A failed teardown logs its error as soon as its sync returns (and retries a
	// second later); a few more seconds on the clock let either show.
	steps := 0
	h.eventually("a few more seconds", func() bool { steps++; return steps > 5 })
	rt.mu.Lock()
	vanished := rt.vanished
	rt.mu.Unlock()
	if vanished != 1 {
		t.Fatalf("the runtime lost %d sandboxes under the kubelet, want 1", vanished)
	}
	if strings.Contains(logs.String(), "syncing pod") {
		t.Errorf("the teardown failed on the runtime's NotFound:\n%s", logs.String())
	}
}

// TestPodDeletedBeforeItsSandboxStartedEndsFailed is a Job's pod deleted (grace period
// 30 s) while its sandbox is still starting, as a pod failure policy's FailJob deletes a
// Job's other pods (conformance's "pod failure policy on exit code to fail the job
// early"). The start is given up, and the last status the kubelet writes before it
// deletes the pod is terminal, Failed, with the container that never ran terminated as
// unknown: the Job controller waits for every pod of a failing Job to be terminal.
func TestPodDeletedBeforeItsSandboxStartedEndsFailed(t *testing.T) {
	h := newHarness(t)
	rt := &heldSandboxes{RuntimeService: h.rt.Client(), prefix: "starting-", reached: make(chan struct{})}
	opts := h.options()
	opts.Runtime = rt
	h.startWith(opts)
	ctx := context.Background()

	pod := newPod("starting-job-pod", "busybox")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	h.createPod(pod)
	select {
	case <-rt.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the pod's sandbox start never reached the runtime")
	}
	p, err := h.getPod(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if _, err := h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("pod object removed", func() bool {
		_, err := h.getPod(pod.Name)
		return isNotFound(err)
	})

	var last *v1.Pod
	for _, a := range h.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if p, ok := u.GetObject().(*v1.Pod); ok && p.Name == pod.Name {
				last = p
			}
		}
	}
	if last == nil {
		t.Fatal("the kubelet wrote no status for the pod")
	}
	if last.Status.Phase != v1.PodFailed {
		t.Errorf("last status phase = %s, want Failed", last.Status.Phase)
	}
	if len(last.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses: %+v", last.Status.ContainerStatuses)
	}
	term := last.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != "ContainerStatusUnknown" || term.ExitCode != 137 {
		t.Errorf("container state = %+v, want terminated ContainerStatusUnknown with exit code 137", last.Status.ContainerStatuses[0].State)
	}
}

// TestFinalDeleteIsSentOnce is a pod whose final DELETE the apiserver answered but
// whose removal the kubelet has not yet seen on its watch, and which is changed again
// meanwhile (as the status the teardown just wrote changes it): the sync that change
// wakes sends no second DELETE. (Each pod of a density run got 2.6 DELETEs, where
// upstream's kubelet and the garbage collector send one each.)
func TestFinalDeleteIsSentOnce(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	deletes := 0
	h.client.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		deletes++
		// Answered, but the pod stays: its removal has not reached the watch yet.
		return true, nil, nil
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return deletes }
	h.start()
	ctx := context.Background()
	pod := newPod("p", "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	h.createPod(pod)
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, ptr.To[int64](0)
	p, err := h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the final DELETE sent", func() bool { return count() >= 1 })
	// Changes to the pod wake its worker, and a few seconds on the clock run the
	// resync; a second DELETE would follow each of them at once.
	for i := range 3 {
		p.Annotations = map[string]string{"changed": fmt.Sprint(i)}
		if p, err = h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		steps := 0
		h.eventually("a few more seconds", func() bool { steps++; return steps > 5 })
	}
	if n := count(); n != 1 {
		t.Errorf("the kubelet sent %d DELETEs of the pod, want 1", n)
	}
}

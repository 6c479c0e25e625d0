package kubelet

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
)

// A restartable init container (sidecar) keeps running beside the main containers, which
// start once it runs; when the main container of a Never pod finishes, the sidecar is
// stopped and the pod succeeds.
func TestSidecarRunsBesideMainContainers(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 30 * time.Second})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	h.createPod(pod)

	p := h.waitPodReal("p", "Running with its sidecar", isRunning)
	side, app := containerStatus(p, "proxy"), containerStatus(p, "app")
	if side.State.Running == nil || side.Started == nil || !*side.Started || !side.Ready {
		t.Errorf("sidecar status %+v", side)
	}
	if app.State.Running == nil {
		t.Errorf("app status %+v", app.State)
	}
	if !conditionTrue(p, v1.PodInitialized) {
		t.Errorf("Initialized = %+v", condition(p, v1.PodInitialized))
	}
	p = h.waitPod("p", "Succeeded, sidecar stopped", func(p *v1.Pod) bool {
		side := containerStatus(p, "proxy")
		return p.Status.Phase == v1.PodSucceeded && side != nil && side.State.Terminated != nil
	})
	if c := condition(p, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("Initialized after completion = %+v", c)
	}
}

// A failing postStart hook shows as upstream's FailedPostStartHook event, and the
// container is killed and restarted.
func TestFailedPostStartHook(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	h.createPod(pod)
	if msg := h.waitEvent("p", "FailedPostStartHook"); msg != "PostStartHook failed" {
		t.Errorf("FailedPostStartHook message %q", msg)
	}
	h.waitPod("p", "restarted after the hook failed", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.RestartCount > 0
	})
}

// An ephemeral container added to a running pod is started once and reported in
// status.ephemeralContainerStatuses.
func TestEphemeralContainerStarts(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.createPod(newPod("p", "app"))
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"},
		TargetContainerName:      "app",
	}}
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = h.waitPod("p", "ephemeral container running", func(p *v1.Pod) bool {
		return len(p.Status.EphemeralContainerStatuses) == 1 && p.Status.EphemeralContainerStatuses[0].State.Running != nil
	})
	if es := p.Status.EphemeralContainerStatuses[0]; es.Name != "debugger" || es.ContainerID == "" {
		t.Errorf("ephemeral container status %+v", es)
	}
}

// The kubelet reports which generation of the pod its status reflects, in its
// conditions too, PodScheduled included (upstream's e2e "pod observedGeneration field
// set in pod conditions").
func TestStatusObservedGeneration(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Generation = 3
	h.createPod(pod)
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if p.Status.ObservedGeneration != 3 {
		t.Errorf("status.observedGeneration = %d, want 3", p.Status.ObservedGeneration)
	}
	for _, t2 := range []v1.PodConditionType{v1.PodReady, v1.PodScheduled} {
		if c := condition(p, t2); c == nil || c.ObservedGeneration != 3 {
			t.Errorf("%s condition %+v, want observedGeneration 3", t2, c)
		}
	}
}

// A sidecar whose liveness probe fails is killed and restarted as a main container
// would be, while the main container keeps running; one whose startup probe fails is
// restarted too (upstream's e2e 'Probing restartable init container').
func TestSidecarProbesRestartIt(t *testing.T) {
	for _, typ := range []string{"liveness", "startup"} {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t)
			h.rt.SetContainerBehavior("proxy", fake.Behavior{ExecExitCode: 1, ExecStdout: "unhealthy"})
			h.start()
			side := v1.Container{Name: "proxy", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}
			if typ == "liveness" {
				side.LivenessProbe = execProbe(1)
			} else {
				side.StartupProbe = execProbe(1)
			}
			h.createPod(podWithSidecar(side))
			p := h.waitPod("p", "the sidecar restarted", func(p *v1.Pod) bool {
				cs := containerStatus(p, "proxy")
				return cs != nil && cs.RestartCount >= 1
			})
			if msg := h.waitEvent("p", "Killing"); msg != "Container proxy failed "+typ+" probe, will be restarted" {
				t.Errorf("Killing event %q", msg)
			}
			if typ == "liveness" {
				if app := containerStatus(p, "app"); app == nil || app.RestartCount != 0 {
					t.Errorf("the main container %+v, want it running on, never restarted", app)
				}
			}
		})
	}
}

// A sidecar's readiness counts toward the pod's: one whose readiness probe fails keeps
// the pod not Ready, naming it (upstream's e2e 'Probing restartable init container with
// readiness probe that fails should never be ready and never restart').
func TestSidecarReadinessCountsForThePod(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("proxy", fake.Behavior{ExecExitCode: 1})
	h.start()
	h.createPod(podWithSidecar(v1.Container{Name: "proxy", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
		ReadinessProbe: execProbe(1)}))
	p := h.waitPod("p", "running, the sidecar probed", func(p *v1.Pod) bool {
		app := containerStatus(p, "app")
		return app != nil && app.Ready && h.rt.Calls("ExecSync") > 0
	})
	if c := condition(p, v1.PodReady); c == nil || c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [proxy]" {
		t.Errorf("Ready condition %+v, want False naming the sidecar", c)
	}
	if c := condition(p, v1.ContainersReady); c == nil || c.Status != v1.ConditionFalse {
		t.Errorf("ContainersReady %+v, want False", c)
	}
}

// While a sidecar waits for its startup probe, the main container not created yet
// reports started false, not unset (upstream's e2e reads *started; it panicked).
func TestWaitingContainerReportsNotStarted(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("proxy", fake.Behavior{ExecExitCode: 1})
	h.start()
	h.createPod(podWithSidecar(v1.Container{Name: "proxy", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
		StartupProbe: execProbe(100)}))
	p := h.waitPod("p", "the sidecar running, the app waiting", func(p *v1.Pod) bool {
		side, app := containerStatus(p, "proxy"), containerStatus(p, "app")
		return side != nil && side.State.Running != nil && app != nil && app.State.Waiting != nil
	})
	for _, name := range []string{"proxy", "app"} {
		if cs := containerStatus(p, name); cs.Started == nil || *cs.Started {
			t.Errorf("%s: started %v, want false", name, cs.Started)
		}
	}
}

// execProbe runs "check" every 10 s; the fake runtime answers it as the container's
// behaviour says.
func execProbe(failureThreshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: failureThreshold}
}

// podWithSidecar is pod "p" with its container "app" and the given sidecar.
func podWithSidecar(side v1.Container) *v1.Pod {
	pod := newPod("p", "app")
	pod.Spec.InitContainers = []v1.Container{side}
	return pod
}

package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
)

func TestNodeRegistrationAndLease(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.RegisterWithTaints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	opts.NodeLabels = map[string]string{"zone": "a"}
	h.startWith(opts)
	ctx := context.Background()

	var node *v1.Node
	h.eventually("node registered with status", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		node = n
		return err == nil && len(n.Status.Conditions) == 4
	})
	for k, want := range map[string]string{
		"kubernetes.io/hostname": testNode, "kubernetes.io/os": "linux", "kubernetes.io/arch": node.Labels["beta.kubernetes.io/arch"],
		"beta.kubernetes.io/os": "linux", "zone": "a",
	} {
		if node.Labels[k] != want || want == "" {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], want)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	for name, want := range map[v1.ResourceName]string{
		v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110", v1.ResourceEphemeralStorage: "100Gi",
	} {
		for _, list := range []v1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
			q := list[name]
			if q.Cmp(resource.MustParse(want)) != 0 {
				t.Errorf("%s = %s, want %s", name, q.String(), want)
			}
		}
	}
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: testNode}}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0] != wantAddrs[0] || node.Status.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses = %v", node.Status.Addresses)
	}
	conds := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range node.Status.Conditions {
		conds[c.Type] = c
	}
	for typ, want := range map[v1.NodeConditionType]struct {
		status v1.ConditionStatus
		reason string
	}{
		v1.NodeReady:          {v1.ConditionTrue, "KubeletReady"},
		v1.NodeMemoryPressure: {v1.ConditionFalse, "KubeletHasSufficientMemory"},
		v1.NodeDiskPressure:   {v1.ConditionFalse, "KubeletHasNoDiskPressure"},
		v1.NodePIDPressure:    {v1.ConditionFalse, "KubeletHasSufficientPID"},
	} {
		if c := conds[typ]; c.Status != want.status || c.Reason != want.reason {
			t.Errorf("condition %s = %s/%s, want %s/%s", typ, c.Status, c.Reason, want.status, want.reason)
		}
	}
	info := node.Status.NodeInfo
	if info.ContainerRuntimeVersion != "containerd://1.6.20" || info.KubeletVersion != Version || info.OperatingSystem != "linux" || info.KernelVersion != "6.1.0" {
		t.Errorf("nodeInfo = %+v", info)
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("kubelet endpoint port = %d", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}

	var lease *coordinationv1.Lease
	h.eventually("lease created", func() bool {
		l, err := h.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, testNode, metav1.GetOptions{})
		lease = l
		return err == nil
	})
	if ptr.Deref(lease.Spec.HolderIdentity, "") != testNode || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 40 {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease owner = %+v", lease.OwnerReferences)
	}
	first := lease.Spec.RenewTime.Time
	h.eventually("lease renewed", func() bool {
		l, err := h.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, testNode, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.Time.After(first)
	})
}

func TestPodStartsAndBecomesReady(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("web", "app", "sidecar")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	h.createPod(pod)

	p := h.waitPod("web", "Running and Ready", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && conditionTrue(p, v1.PodReady)
	})
	for _, typ := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled} {
		if !conditionTrue(p, typ) {
			t.Errorf("condition %s not True: %+v", typ, condition(p, typ))
		}
	}
	if p.Status.PodIP != "10.88.0.1" || len(p.Status.PodIPs) != 1 || p.Status.HostIP != "10.0.0.5" || len(p.Status.HostIPs) != 1 {
		t.Errorf("IPs: pod %s %v host %s %v", p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP, p.Status.HostIPs)
	}
	if p.Status.StartTime == nil || p.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("startTime %v qosClass %s", p.Status.StartTime, p.Status.QOSClass)
	}
	for _, name := range []string{"app", "sidecar"} {
		cs := containerStatus(p, name)
		if cs == nil || cs.State.Running == nil || !cs.Ready || !ptr.Deref(cs.Started, false) || cs.RestartCount != 0 {
			t.Fatalf("container %s status %+v", name, cs)
		}
		if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.Image != "registry.local/"+name+":1.0" ||
			!strings.HasPrefix(cs.ImageID, "registry.local/"+name+"@sha256:") {
			t.Errorf("container %s ids: %s %s %s", name, cs.ContainerID, cs.Image, cs.ImageID)
		}
	}
	if n := h.rt.Calls("RunPodSandbox"); n != 1 {
		t.Errorf("RunPodSandbox called %d times", n)
	}
	for reason, want := range map[string]string{
		"Pulling": `Pulling image "registry.local/`, "Created": "Created container: ", "Started": "Started container ",
	} {
		if msg := h.waitEvent("web", reason); !strings.HasPrefix(msg, want) {
			t.Errorf("%s event %q, want prefix %q", reason, msg, want)
		}
	}
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		exit   int32
		check  func(t *testing.T, h *harness)
	}{
		{
			name: "Always restarts with back-off", policy: v1.RestartPolicyAlways, exit: 1,
			check: func(t *testing.T, h *harness) {
				sawBackoff := false
				p := h.waitPod("p", "restartCount 3", func(p *v1.Pod) bool {
					cs := containerStatus(p, "app")
					if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
						sawBackoff = true
						if !strings.HasPrefix(cs.State.Waiting.Message, "back-off ") {
							t.Errorf("back-off message %q", cs.State.Waiting.Message)
						}
					}
					return cs != nil && cs.RestartCount >= 3
				})
				if !sawBackoff {
					t.Error("never reported CrashLoopBackOff")
				}
				if msg := h.waitEvent("p", "BackOff"); msg != "Back-off restarting failed container app in pod p_default(uid-p)" {
					t.Errorf("BackOff event %q", msg)
				}
				cs := containerStatus(p, "app")
				if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
					t.Errorf("lastState = %+v", cs.LastTerminationState)
				}
				if p.Status.Phase != v1.PodRunning {
					t.Errorf("phase %s, want Running", p.Status.Phase)
				}
			},
		},
		{
			name: "Never leaves the pod Failed", policy: v1.RestartPolicyNever, exit: 2,
			check: func(t *testing.T, h *harness) {
				p := h.waitPod("p", "phase Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
				cs := containerStatus(p, "app")
				if term := cs.State.Terminated; term == nil || term.ExitCode != 2 || term.Reason != "Error" || cs.RestartCount != 0 {
					t.Errorf("container status %+v", cs)
				}
				if c := condition(p, v1.PodReady); c == nil || c.Status != v1.ConditionFalse || c.Reason != "PodCompleted" {
					t.Errorf("Ready condition %+v", c)
				}
				if n := h.rt.Calls("StartContainer"); n != 1 {
					t.Errorf("StartContainer called %d times", n)
				}
			},
		},
		{
			name: "OnFailure leaves a succeeded pod Succeeded", policy: v1.RestartPolicyOnFailure, exit: 0,
			check: func(t *testing.T, h *harness) {
				p := h.waitPod("p", "phase Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
				if cs := containerStatus(p, "app"); cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
					t.Errorf("container status %+v", cs)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 5 * time.Second, ExitCode: tt.exit})
			h.start()
			pod := newPod("p", "app")
			pod.Spec.RestartPolicy = tt.policy
			h.createPod(pod)
			tt.check(t, h)
		})
	}
}

// TestContainerRestartRules runs containers whose own restart policy and rules
// override the pod's (ContainerRestartRules): a container that must not restart in
// an Always pod ends the pod, a rule matching the exit code restarts a container of a
// Never pod, and a RestartAllContainers rule restarts the container alone, saying so.
func TestContainerRestartRules(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	rule := func(action v1.ContainerRestartRuleAction, code int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{code}}}}
	}
	t.Run("never container in an Always pod", func(t *testing.T) {
		h := newHarness(t)
		h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 5 * time.Second, ExitCode: 3})
		h.start()
		pod := newPod("p", "app")
		pod.Spec.Containers[0].RestartPolicy = &never
		h.createPod(pod)
		p := h.waitPod("p", "phase Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if cs := containerStatus(p, "app"); cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 || cs.RestartCount != 0 {
			t.Errorf("container status %+v", cs)
		}
		if n := h.rt.Calls("StartContainer"); n != 1 {
			t.Errorf("StartContainer called %d times", n)
		}
	})
	for _, action := range []v1.ContainerRestartRuleAction{v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers} {
		t.Run("rule "+string(action)+" in a Never pod", func(t *testing.T) {
			h := newHarness(t)
			h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 5 * time.Second, ExitCode: 42})
			h.start()
			pod := newPod("p", "app")
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
			pod.Spec.Containers[0].RestartPolicy = &never
			pod.Spec.Containers[0].RestartPolicyRules = rule(action, 42)
			h.createPod(pod)
			p := h.waitPod("p", "restartCount 1", func(p *v1.Pod) bool {
				cs := containerStatus(p, "app")
				return cs != nil && cs.RestartCount >= 1
			})
			if p.Status.Phase != v1.PodRunning {
				t.Errorf("phase %s, want Running", p.Status.Phase)
			}
			if action == v1.ContainerRestartRuleActionRestartAllContainers {
				want := "Container app exited with code 42, for which its restart rules restart every container of the pod; this kubelet restarts only this container"
				if msg := h.waitEvent("p", "RestartAllContainersUnsupported"); msg != want {
					t.Errorf("event %q, want %q", msg, want)
				}
			}
		})
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("init-1", fake.Behavior{Exits: true, After: 10 * time.Second})
	h.rt.SetContainerBehavior("init-2", fake.Behavior{Exits: true, After: 10 * time.Second})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.InitContainers = []v1.Container{{Name: "init-1", Image: "busybox"}, {Name: "init-2", Image: "busybox"}}
	h.createPod(pod)

	sawInitializing := false
	p := h.waitPod("p", "Running after init", func(p *v1.Pod) bool {
		// The second init container waits as PodInitializing while the first runs, as
		// upstream's (the conformance InitContainer specs check it).
		if cs := containerStatus(p, "init-2"); cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "PodInitializing" {
			t.Errorf("init-2 waiting as %q, want PodInitializing", cs.State.Waiting.Reason)
		}
		if cs := containerStatus(p, "app"); cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "PodInitializing" {
			sawInitializing = true
			if c := condition(p, v1.PodInitialized); c == nil || c.Status != v1.ConditionFalse || c.Reason != "ContainersNotInitialized" {
				t.Errorf("Initialized while initializing: %+v", c)
			}
		}
		return p.Status.Phase == v1.PodRunning
	})
	if !sawInitializing {
		t.Error("app never reported PodInitializing")
	}
	i1, i2, app := containerStatus(p, "init-1"), containerStatus(p, "init-2"), containerStatus(p, "app")
	for _, cs := range []*v1.ContainerStatus{i1, i2} {
		if cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
			t.Fatalf("init container %s: %+v", cs.Name, cs.State)
		}
		if !cs.Ready {
			t.Errorf("completed init container %s is not ready", cs.Name)
		}
	}
	if i2.State.Terminated.StartedAt.Before(&i1.State.Terminated.FinishedAt) {
		t.Errorf("init-2 started %v before init-1 finished %v", i2.State.Terminated.StartedAt, i1.State.Terminated.FinishedAt)
	}
	if app.State.Running == nil || app.State.Running.StartedAt.Before(&i2.State.Terminated.FinishedAt) {
		t.Errorf("app state %+v started before init-2 finished", app.State)
	}
	if !conditionTrue(p, v1.PodInitialized) {
		t.Errorf("Initialized = %+v", condition(p, v1.PodInitialized))
	}
}

func TestFailedInitContainerUnderNeverFailsPod(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("init", fake.Behavior{Exits: true, After: time.Second, ExitCode: 3})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
	h.createPod(pod)
	p := h.waitPod("p", "phase Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if cs := containerStatus(p, "app"); cs.State.Running != nil || cs.ContainerID != "" {
		t.Errorf("app ran although init failed: %+v", cs)
	}
}

func TestLivenessProbeFailureRestarts(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/healthy"}}},
		PeriodSeconds:    5,
		FailureThreshold: 2,
	}
	h.createPod(pod)
	p := h.waitPod("p", "a restart after liveness failures", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.RestartCount >= 1 && cs.State.Running != nil
	})
	last := containerStatus(p, "app").LastTerminationState.Terminated
	if last == nil || last.ExitCode != 137 {
		t.Errorf("lastState = %+v, want a kill (137)", last)
	}
	if h.rt.Calls("ExecSync") < 2 {
		t.Errorf("ExecSync called %d times, want at least the failure threshold", h.rt.Calls("ExecSync"))
	}
	if msg := h.waitEvent("p", "Killing"); msg != "Container app failed liveness probe, will be restarted" {
		t.Errorf("Killing event %q", msg)
	}
	if msg := h.waitEvent("p", "Unhealthy"); !strings.HasPrefix(msg, "Liveness probe failed: ") {
		t.Errorf("Unhealthy event %q", msg)
	}
}

func TestReadinessProbe(t *testing.T) {
	for _, tt := range []struct {
		name      string
		exitCode  int32
		wantReady bool
	}{
		{"passing probe makes the pod Ready", 0, true},
		{"failing probe keeps it unready", 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: tt.exitCode})
			h.start()
			pod := newPod("p", "app")
			pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
				ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
				PeriodSeconds: 2,
			}
			h.createPod(pod)
			p := h.waitPod("p", "probed", func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodRunning && h.rt.Calls("ExecSync") >= 3
			})
			p = h.waitPod("p", "status settled", func(p *v1.Pod) bool { return conditionTrue(p, v1.PodReady) == tt.wantReady })
			if cs := containerStatus(p, "app"); cs.Ready != tt.wantReady || cs.RestartCount != 0 {
				t.Errorf("container ready=%v restarts=%d, want ready=%v and no restart", cs.Ready, cs.RestartCount, tt.wantReady)
			}
			if !tt.wantReady {
				if c := condition(p, v1.ContainersReady); c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [app]" {
					t.Errorf("ContainersReady = %+v", c)
				}
			}
		})
	}
}

func TestGracefulDeletion(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	h.createPod(pod)
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	// What the apiserver does on a graceful DELETE: set the deletion timestamp and grace.
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("pod object removed", func() bool {
		_, err := h.getPod("p")
		return isNotFound(err)
	})
	if h.rt.Calls("ExecSync") != 1 {
		t.Errorf("preStop ran %d times, want 1", h.rt.Calls("ExecSync"))
	}
	if h.rt.Calls("StopContainer") < 1 {
		t.Error("container never stopped")
	}
	var deleted bool
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			deleted = true
		}
	}
	if !deleted {
		t.Error("no DELETE of the pod")
	}
	h.eventually("runtime cleaned up", func() bool {
		sbs, _ := h.rt.Client().ListPodSandbox(context.Background(), nil)
		cs, _ := h.rt.Client().ListContainers(context.Background(), nil)
		return len(sbs) == 0 && len(cs) == 0
	})
}

func TestRestartedKubeletAdoptsContainers(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.createPod(newPod("p", "app"))
	h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && conditionTrue(p, v1.PodReady) })
	before, err := h.rt.Client().ListContainers(context.Background(), nil)
	if err != nil || len(before) != 1 {
		t.Fatalf("containers before restart: %v %v", before, err)
	}
	h.stop()
	starts, sandboxes := h.rt.Calls("StartContainer"), h.rt.Calls("RunPodSandbox")

	h.start()
	// Give the new kubelet many relists and resyncs to do something wrong.
	for range 30 {
		h.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	h.waitPod("p", "still Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && conditionTrue(p, v1.PodReady) })
	if h.rt.Calls("StartContainer") != starts || h.rt.Calls("RunPodSandbox") != sandboxes || h.rt.Calls("StopContainer") != 0 {
		t.Errorf("restarted kubelet touched containers: starts %d->%d, sandboxes %d->%d, stops %d",
			starts, h.rt.Calls("StartContainer"), sandboxes, h.rt.Calls("RunPodSandbox"), h.rt.Calls("StopContainer"))
	}
	after, _ := h.rt.Client().ListContainers(context.Background(), nil)
	if len(after) != 1 || after[0].Id != before[0].Id || after[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("containers after restart: %v", after)
	}
}

func TestOrphanedRuntimeObjectsAreRemoved(t *testing.T) {
	h := newHarness(t)
	// A sandbox whose pod no longer exists, left by an earlier kubelet.
	_, err := h.rt.Client().RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "gone", Namespace: "default", Uid: "uid-gone"},
		Labels:   map[string]string{labelPodUID: "uid-gone"},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.eventually("orphan removed", func() bool {
		sbs, _ := h.rt.Client().ListPodSandbox(context.Background(), nil)
		return len(sbs) == 0
	})
}

func TestExistingNodeIsReconciledAndPodCIDRReported(t *testing.T) {
	h := newHarness(t)
	// A node registered earlier, since given a pod CIDR, with a stale label.
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid", Labels: map[string]string{"kubernetes.io/os": "plan9", "keep": "me"}},
		Spec:       v1.NodeSpec{PodCIDR: "10.244.5.0/24"},
	}
	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), existing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rt.PreloadImages("registry.local/base:1")
	cidrs := make(chan string, 4)
	opts := h.options()
	opts.PodCIDRChanged = func(c string) { cidrs <- c }
	h.startWith(opts)

	var node *v1.Node
	h.eventually("node status posted", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		node = n
		return err == nil && len(n.Status.Conditions) == 4
	})
	if node.Labels["kubernetes.io/os"] != "linux" || node.Labels["keep"] != "me" {
		t.Errorf("labels not reconciled: %v", node.Labels)
	}
	if len(node.Status.Images) != 1 || node.Status.Images[0].Names[len(node.Status.Images[0].Names)-1] != "registry.local/base:1" ||
		node.Status.Images[0].SizeBytes <= 0 {
		t.Errorf("images = %+v", node.Status.Images)
	}
	select {
	case c := <-cidrs:
		if c != "10.244.5.0/24" {
			t.Errorf("pod CIDR %q", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pod CIDR never reported")
	}
}

func TestImageChangeReplacesContainer(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	h.createPod(pod)
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	oldID := containerStatus(p, "app").ContainerID

	p.Spec.Containers[0].Image = "registry.local/app:2.0"
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = h.waitPod("p", "the new image running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs.Image == "registry.local/app:2.0" && cs.State.Running != nil && cs.ContainerID != oldID
	})
	cs := containerStatus(p, "app")
	if cs.RestartCount != 1 || !strings.HasPrefix(cs.ImageID, "registry.local/app@sha256:") {
		t.Errorf("restartCount %d imageID %q", cs.RestartCount, cs.ImageID)
	}
	if msg := h.waitEvent("p", "Killing"); msg != "Container app definition changed, will be restarted" {
		t.Errorf("Killing event %q", msg)
	}
}

func TestAdmissionRejectsPodsThatDoNotFit(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.MaxPods = 2
	h.startWith(opts)
	big := newPod("big", "app")
	big.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("5")}
	h.createPod(big)
	p := h.waitPod("big", "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "OutOfcpu" || p.Status.Message != "Pod was rejected: Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}

	h.createPod(newPod("a", "app"))
	h.createPod(newPod("b", "app"))
	h.waitPod("a", "a Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	h.waitPod("b", "b Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	h.createPod(newPod("c", "app")) // a and b fill the node's 2 pods ("big" failed and does not count)
	p = h.waitPod("c", "c rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "OutOfpods" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if n := h.rt.Calls("RunPodSandbox"); n != 2 {
		t.Errorf("%d sandboxes created, want 2", n)
	}
}

// TestActiveDeadlineFailsPod: the pod fails at its deadline, not a second early, and
// without a periodic sync (a minute apart) to find it: the worker asks for a wake then.
// The clock stands still from the deadline on.
func TestActiveDeadlineFailsPod(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](90)
	h.createPod(pod)
	p := h.waitPod("p", "Running", isRunning)
	deadline := p.Status.StartTime.Add(90 * time.Second)

	h.clock.SetTime(deadline.Add(-time.Second))
	time.Sleep(200 * time.Millisecond)
	if p, _ := h.getPod("p"); p.Status.Phase != v1.PodRunning {
		t.Fatalf("phase %s a second before the deadline", p.Status.Phase)
	}
	h.clock.SetTime(deadline)
	h.waitReal("the pod to fail at its deadline", func() bool {
		p, _ = h.getPod("p")
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	h.eventually("containers stopped", func() bool {
		cs, _ := h.rt.Client().ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		return len(cs) == 0
	})
}

// A running pod's resyncs read the runtime's lists but not, again, each unchanged
// container's status; a state change is still seen at once.
func TestUnchangedStatusesAreNotReadAgain(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: time.Minute, ExitCode: 7})
	opts := h.options()
	opts.ResyncPeriod = 10 * time.Second // several resyncs before the container exits
	h.startWith(opts)
	pod := newPod("web", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	h.createPod(pod)
	h.waitPod("web", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	lists, statuses := h.rt.Calls("ListContainers"), h.rt.Calls("ContainerStatus")
	for range 30 { // three resync periods at most
		h.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	h.eventually("more resyncs", func() bool { return h.rt.Calls("ListContainers") >= lists+3 })
	if n := h.rt.Calls("ContainerStatus"); n != statuses {
		t.Errorf("ContainerStatus called %d more times for a container that stayed running", n-statuses)
	}

	p := h.waitPod("web", "Failed with the exit code", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if cs := containerStatus(p, "app"); cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 7 {
		t.Errorf("app status %+v", cs)
	}
}

// TestDeletionFinishesWithContainerNeverStarted: a kubelet killed between creating a
// container and starting it leaves the container "created"; containerd's StopContainer
// leaves such a container as it is, so the restarted kubelet must remove it, or the
// pod's deletion never finishes (the fault suite saw a pod terminating for good).
func TestDeletionFinishesWithContainerNeverStarted(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.createPod(newPod("p", "app"))
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	h.stop()

	// What the killed kubelet left: a second container of the pod, created, not started.
	ctx := context.Background()
	running, err := h.rt.Client().ListContainers(ctx, nil)
	if err != nil || len(running) != 1 {
		t.Fatalf("containers: %v %v", running, err)
	}
	st, err := h.rt.Client().ContainerStatus(ctx, running[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	meta := &runtimeapi.ContainerMetadata{Name: running[0].Metadata.Name, Attempt: running[0].Metadata.Attempt + 1}
	if _, err := h.rt.Client().CreateContainer(ctx, running[0].PodSandboxId, &runtimeapi.ContainerConfig{
		Metadata: meta, Image: running[0].Image, Labels: running[0].Labels, Annotations: st.Status.Annotations,
	}, &runtimeapi.PodSandboxConfig{}); err != nil {
		t.Fatal(err)
	}

	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = ptr.To[int64](0)
	if _, err := h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.eventually("pod object removed", func() bool {
		_, err := h.getPod("p")
		return isNotFound(err)
	})
	h.eventually("runtime cleaned up", func() bool {
		cs, _ := h.rt.Client().ListContainers(ctx, nil)
		return len(cs) == 0
	})
}

// With --cloud-provider external the node registers tainted uninitialized with its
// --node-ip annotated, and later statuses keep the addresses and conditions that the
// cloud-controller-manager wrote.
func TestExternalCloudProvider(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.ExternalCloudProvider = true
	h.startWith(opts)
	ctx := context.Background()
	var node *v1.Node
	h.eventually("node registered", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		node = n
		return err == nil && len(n.Status.Conditions) == 4
	})
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != (v1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}) {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	if got := node.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != "10.0.0.5" {
		t.Errorf("provided-node-ip annotation = %q", got)
	}
	ccmAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeExternalIP, Address: "203.0.113.5"}}
	node.Status.Addresses = ccmAddrs
	node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated"})
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	written := h.clock.Now()
	h.eventually("a status posted after the provider's", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			return false
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.LastHeartbeatTime.After(written)
			}
		}
		return false
	})
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0] != ccmAddrs[0] || node.Status.Addresses[1] != ccmAddrs[1] {
		t.Errorf("addresses = %v, want the provider's %v", node.Status.Addresses, ccmAddrs)
	}
	kept := false
	for _, c := range node.Status.Conditions {
		kept = kept || (c.Type == v1.NodeNetworkUnavailable && c.Reason == "RouteCreated")
	}
	if !kept {
		t.Errorf("conditions = %v: the route controller's NetworkUnavailable was dropped", node.Status.Conditions)
	}
}

// An extended resource a client advertised in the node's status (as the scheduler's
// preemption specs do) survives the kubelet's later status posts, in capacity and in
// allocatable, as upstream's kubelet keeps it; the kubelet's own resources stay its own.
func TestExtendedResourcesSurviveStatusUpdates(t *testing.T) {
	h := newHarness(t)
	h.start()
	ctx := context.Background()
	h.eventually("node registered with status", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		return err == nil && len(n.Status.Conditions) == 4
	})
	node, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const foo = v1.ResourceName("scheduling.k8s.io/foo")
	node.Status.Capacity[foo] = resource.MustParse("5")
	node.Status.Capacity[v1.ResourceCPU] = resource.MustParse("64") // not the client's to change
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new image changes the status, so the kubelet posts it again.
	h.rt.PreloadImages("registry.local/later:1")
	h.eventually("status posted with the new image", func() bool {
		n, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		node = n
		return err == nil && len(n.Status.Images) == 1
	})
	for _, list := range []v1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		if q := list[foo]; q.Cmp(resource.MustParse("5")) != 0 {
			t.Errorf("%s = %s, want 5 (capacity %v, allocatable %v)", foo, q.String(), node.Status.Capacity, node.Status.Allocatable)
		}
		if q := list[v1.ResourceCPU]; q.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("cpu = %s, want the machine's 4", q.String())
		}
	}
}

// A pod that bypasses the scheduler with a host port another pod on the node holds is
// rejected, as upstream's kubelet admission does; a free port is not.
func TestAdmissionRejectsTakenHostPorts(t *testing.T) {
	h := newHarness(t)
	h.start()
	withPort := func(name string, port v1.ContainerPort) *v1.Pod {
		p := newPod(name, "app")
		p.Spec.Containers[0].Ports = []v1.ContainerPort{port}
		return p
	}
	h.createPod(withPort("a-holder", v1.ContainerPort{ContainerPort: 80, HostPort: 8080}))
	h.waitPod("a-holder", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	h.createPod(withPort("b-taker", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.1", Protocol: v1.ProtocolTCP}))
	p := h.waitPod("b-taker", "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "NodePorts" || p.Status.Message != "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	h.createPod(withPort("c-udp", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolUDP}))
	h.waitPod("c-udp", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
}

// The Lease and node status loops wait 10 s plus up to 4%, as upstream's: kubelets
// started in the same second (a rack powered on, a thousand hollow nodes) drift apart
// instead of renewing in step for ever.
func TestJitteredSpreadsWithinFourPercent(t *testing.T) {
	const d = 10 * time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		j := jittered(d)
		if j < d || j > d+d/25 {
			t.Fatalf("jittered(%v) = %v, outside [10 s, 10.4 s]", d, j)
		}
		seen[j.Round(10*time.Millisecond)] = true
	}
	if len(seen) < 20 {
		t.Errorf("1,000 waits took %d distinct values (to 10 ms): not spread", len(seen))
	}
}

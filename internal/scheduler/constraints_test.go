package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"mizzen/internal/scheduler/config"
)

const zoneKey = v1.LabelTopologyZone

func podAffinity(anti bool, required bool, key string, kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		term := v1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}, TopologyKey: key}
		for i := 0; i+1 < len(kv); i += 2 {
			term.LabelSelector.MatchLabels[kv[i]] = kv[i+1]
		}
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &v1.Affinity{}
		}
		if anti {
			if p.Spec.Affinity.PodAntiAffinity == nil {
				p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{}
			}
			a := p.Spec.Affinity.PodAntiAffinity
			if required {
				a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, term)
			} else {
				a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: term})
			}
			return
		}
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &v1.PodAffinity{}
		}
		a := p.Spec.Affinity.PodAffinity
		if required {
			a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, term)
		} else {
			a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: term})
		}
	}
}

func spread(maxSkew int32, key string, when v1.UnsatisfiableConstraintAction, kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			sel.MatchLabels[kv[i]] = kv[i+1]
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, v1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: sel,
		})
	}
}

func zonedNodes() []*v1.Node {
	return []*v1.Node{
		node("a1", 4000, 8192, withLabels(zoneKey, "a")),
		node("a2", 4000, 8192, withLabels(zoneKey, "a")),
		node("b1", 4000, 8192, withLabels(zoneKey, "b")),
	}
}

func TestInterPodAndSpreadPlacement(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		pod      *v1.Pod
		want     []string
	}{
		{
			name:     "required affinity to a zone",
			nodes:    zonedNodes(),
			existing: []*v1.Pod{pod("db", 100, 0, onNode("b1"), withPodLabels("app", "db"))},
			pod:      pod("web", 100, 0, podAffinity(false, true, zoneKey, "app", "db")),
			want:     []string{"b1"},
		},
		{
			name:     "required affinity by hostname",
			nodes:    zonedNodes(),
			existing: []*v1.Pod{pod("db", 100, 0, onNode("a2"), withPodLabels("app", "db"))},
			pod:      pod("web", 100, 0, podAffinity(false, true, v1.LabelHostname, "app", "db")),
			want:     []string{"a2"},
		},
		{
			name:     "required anti-affinity over zones",
			nodes:    zonedNodes(),
			existing: []*v1.Pod{pod("web-0", 100, 0, onNode("a1"), withPodLabels("app", "web"))},
			pod:      pod("web-1", 100, 0, withPodLabels("app", "web"), podAffinity(true, true, zoneKey, "app", "web")),
			want:     []string{"b1"},
		},
		{
			name:  "existing pod's anti-affinity keeps newcomers away",
			nodes: zonedNodes(),
			existing: []*v1.Pod{pod("loner", 100, 0, onNode("b1"), withPodLabels("app", "loner"),
				podAffinity(true, true, zoneKey, "app", "noisy"))},
			pod:  pod("noisy", 100, 0, withPodLabels("app", "noisy")),
			want: []string{"a1", "a2"},
		},
		{
			name:     "preferred affinity",
			nodes:    zonedNodes(),
			existing: []*v1.Pod{pod("cache", 100, 0, onNode("a1"), withPodLabels("app", "cache"))},
			pod:      pod("web", 100, 0, podAffinity(false, false, v1.LabelHostname, "app", "cache")),
			want:     []string{"a1"},
		},
		{
			name:     "preferred anti-affinity",
			nodes:    []*v1.Node{node("n1", 4000, 8192), node("n2", 4000, 8192)},
			existing: []*v1.Pod{pod("web-0", 100, 0, onNode("n1"), withPodLabels("app", "web"))},
			pod:      pod("web-1", 100, 0, withPodLabels("app", "web"), podAffinity(true, false, v1.LabelHostname, "app", "web")),
			want:     []string{"n2"},
		},
		{
			name:  "hard topology spread over zones",
			nodes: zonedNodes(),
			existing: []*v1.Pod{
				pod("w0", 100, 0, onNode("a1"), withPodLabels("app", "w")),
				pod("w1", 100, 0, onNode("a2"), withPodLabels("app", "w")),
			},
			pod:  pod("w2", 100, 0, withPodLabels("app", "w"), spread(1, zoneKey, v1.DoNotSchedule, "app", "w")),
			want: []string{"b1"},
		},
		{
			name:  "soft topology spread prefers the emptier zone",
			nodes: zonedNodes(),
			existing: []*v1.Pod{
				pod("w0", 100, 0, onNode("b1"), withPodLabels("app", "w")),
				pod("w1", 100, 0, onNode("b1"), withPodLabels("app", "w")),
			},
			pod:  pod("w2", 100, 0, withPodLabels("app", "w"), spread(1, zoneKey, v1.ScheduleAnyway, "app", "w")),
			want: []string{"a1", "a2"},
		},
		{
			name:  "minDomains forces a new domain",
			nodes: []*v1.Node{node("a1", 4000, 8192, withLabels(zoneKey, "a")), node("b1", 4000, 8192, withLabels(zoneKey, "b"))},
			existing: []*v1.Pod{
				pod("w0", 100, 0, onNode("a1"), withPodLabels("app", "w")),
			},
			pod: pod("w1", 100, 0, withPodLabels("app", "w"), spread(1, zoneKey, v1.DoNotSchedule, "app", "w"), func(p *v1.Pod) {
				three := int32(3)
				p.Spec.TopologySpreadConstraints[0].MinDomains = &three
			}),
			// With fewer domains than minDomains the global minimum is 0, so only b1 (0+1-0=1) fits.
			want: []string{"b1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tt.nodes {
				objs = append(objs, n)
			}
			for _, p := range tt.existing {
				objs = append(objs, p)
			}
			env := startScheduler(t, nil, objs...)
			env.createPod(tt.pod)
			got := env.waitScheduled(tt.pod.Namespace, tt.pod.Name)
			ok := false
			for _, w := range tt.want {
				ok = ok || w == got
			}
			if !ok {
				t.Errorf("pod placed on %q, want one of %v", got, tt.want)
			}
		})
	}
}

func TestFailureMessageAndEvent(t *testing.T) {
	env := startScheduler(t, nil,
		node("n1", 1000, 4096), node("n2", 1000, 4096), node("n3", 1000, 4096),
		node("g1", 8000, 4096, withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule)),
		node("g2", 8000, 4096, withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule)),
	)
	env.createPod(pod("big", 4000, 0))
	got, msg := env.waitUnschedulable("default", "big")
	// Upstream sorts the "count reason" strings, and the preemption message ends with its
	// own period before the one FitError appends.
	want := "0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu. " +
		"preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.."
	if msg != want {
		t.Errorf("condition message:\n got %q\nwant %q", msg, want)
	}
	if got.Spec.NodeName != "" {
		t.Errorf("pod was bound to %q", got.Spec.NodeName)
	}
	if note := env.waitEvent("default", "big", "FailedScheduling"); note != want {
		t.Errorf("FailedScheduling event note:\n got %q\nwant %q", note, want)
	}

	// A node with room arrives: the parked pod is retried and placed.
	env.createNode(node("n4", 8000, 4096))
	if n := env.waitScheduled("default", "big"); n != "n4" {
		t.Errorf("pod placed on %q after node add, want n4", n)
	}
	if note := env.waitEvent("default", "big", "Scheduled"); note != "Successfully assigned default/big to n4" {
		t.Errorf("Scheduled event note %q", note)
	}
}

func TestNoNodes(t *testing.T) {
	env := startScheduler(t, nil)
	env.createPod(pod("p", 100, 0))
	_, msg := env.waitUnschedulable("default", "p")
	if msg != "no nodes available to schedule pods" {
		t.Errorf("message %q", msg)
	}
	env.createNode(node("n1", 1000, 1024))
	if n := env.waitScheduled("default", "p"); n != "n1" {
		t.Errorf("placed on %q", n)
	}
}

func TestPreemption(t *testing.T) {
	env := startScheduler(t, nil,
		node("n1", 2000, 4096), node("n2", 2000, 4096),
		pod("low-1", 1500, 0, onNode("n1"), withPriority(10)),
		pod("mid-2", 1500, 0, onNode("n2"), withPriority(50)),
	)
	env.createPod(pod("high", 1500, 0, withPriority(100)))
	// The lowest-priority victim is chosen: n1's pod is deleted and n1 nominated.
	err := pollUntil(func() (bool, error) {
		p, err := env.client.CoreV1().Pods("default").Get(context.Background(), "high", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.Status.NominatedNodeName == "n1" || p.Spec.NodeName == "n1", nil
	})
	if err != nil {
		t.Fatalf("high was not nominated to n1: %v", err)
	}
	if n := env.waitScheduled("default", "high"); n != "n1" {
		t.Errorf("high placed on %q, want n1", n)
	}
	if _, err := env.client.CoreV1().Pods("default").Get(context.Background(), "low-1", metav1.GetOptions{}); err == nil {
		t.Errorf("victim low-1 still exists")
	}
	if _, err := env.client.CoreV1().Pods("default").Get(context.Background(), "mid-2", metav1.GetOptions{}); err != nil {
		t.Errorf("mid-2 should survive: %v", err)
	}
	if note := env.waitEvent("default", "low-1", "Preempted"); !strings.HasPrefix(note, "Preempted by pod uid-high on node n1") {
		t.Errorf("Preempted event note %q", note)
	}
}

func TestPreemptionRespectsPDB(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guard"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}
	env := startScheduler(t, nil,
		node("n1", 2000, 4096), node("n2", 2000, 4096),
		pod("guarded", 1500, 0, onNode("n1"), withPriority(10), withPodLabels("app", "guarded")),
		pod("free", 1500, 0, onNode("n2"), withPriority(10)),
		pdb,
	)
	env.createPod(pod("high", 1500, 0, withPriority(100)))
	if n := env.waitScheduled("default", "high"); n != "n2" {
		t.Errorf("high placed on %q, want n2 (n1's victim is protected by a PDB)", n)
	}
	if _, err := env.client.CoreV1().Pods("default").Get(context.Background(), "guarded", metav1.GetOptions{}); err != nil {
		t.Errorf("PDB-protected pod was preempted: %v", err)
	}
}

func TestPreemptionNever(t *testing.T) {
	env := startScheduler(t, nil, node("n1", 1000, 4096), pod("low", 1000, 0, onNode("n1"), withPriority(1)))
	never := v1.PreemptNever
	env.createPod(pod("high", 1000, 0, withPriority(100), func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never }))
	_, msg := env.waitUnschedulable("default", "high")
	want := "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
	if msg != want {
		t.Errorf("message\n got %q\nwant %q", msg, want)
	}
}

func TestProfilesAndForeignPods(t *testing.T) {
	cfg, err := config.Parse([]byte(`
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      disabled:
      - name: NodeResourcesFit
      - name: NodeResourcesBalancedAllocation
      enabled:
      - name: NodeResourcesFit
        weight: 5
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`))
	if err != nil {
		t.Fatal(err)
	}
	env := startScheduler(t, cfg,
		node("busy", 4000, 8192), node("idle", 4000, 8192),
		pod("existing", 3000, 6000, onNode("busy")),
	)
	env.createPod(pod("spread", 500, 500))
	env.createPod(pod("packed", 500, 500, func(p *v1.Pod) { p.Spec.SchedulerName = "packer" }))
	env.createPod(pod("foreign", 500, 500, func(p *v1.Pod) { p.Spec.SchedulerName = "other-scheduler" }))
	if n := env.waitScheduled("default", "spread"); n != "idle" {
		t.Errorf("default profile placed on %q, want idle (LeastAllocated)", n)
	}
	if n := env.waitScheduled("default", "packed"); n != "busy" {
		t.Errorf("packer profile placed on %q, want busy (MostAllocated)", n)
	}
	// Give the scheduler a chance to (wrongly) touch the foreign pod, then check it did not.
	env.createPod(pod("marker", 100, 0))
	env.waitScheduled("default", "marker")
	p, _ := env.client.CoreV1().Pods("default").Get(context.Background(), "foreign", metav1.GetOptions{})
	if p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 {
		t.Errorf("pod of another scheduler was touched: node %q conditions %v", p.Spec.NodeName, p.Status.Conditions)
	}
}

func TestVolumeBinding(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	className := "local"
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-b"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:         v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: className,
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
	boundPV := pv.DeepCopy()
	boundPV.Name = "pv-bound-a"
	boundPV.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"a"}
	boundPV.Spec.ClaimRef = &v1.ObjectReference{Namespace: "default", Name: "bound"}
	boundPV.Status.Phase = v1.VolumeBound
	claim := func(name, volume string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-claim-" + name)},
			Spec: v1.PersistentVolumeClaimSpec{
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				StorageClassName: &className,
				VolumeName:       volume,
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("500Mi")}},
			},
		}
		if volume != "" {
			c.Status.Phase = v1.ClaimBound
		}
		return c
	}
	withClaim := func(name string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	env := startScheduler(t, nil,
		node("a", 4000, 4096), node("b", 4000, 4096),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		pv, boundPV, claim("bound", "pv-bound-a"), claim("delayed", ""),
	)

	env.createPod(pod("uses-bound", 100, 0, withClaim("bound")))
	if n := env.waitScheduled("default", "uses-bound"); n != "a" {
		t.Errorf("pod with a bound claim placed on %q, want a (volume node affinity)", n)
	}

	// The WaitForFirstConsumer claim can only use pv-b on node b. Emulate the PV
	// controller: once the scheduler claims the PV, bind the claim.
	go func() {
		_ = pollUntil(func() (bool, error) {
			v, err := env.client.CoreV1().PersistentVolumes().Get(context.Background(), "pv-b", metav1.GetOptions{})
			if err != nil || v.Spec.ClaimRef == nil {
				return false, nil
			}
			c, err := env.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "delayed", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			c.Spec.VolumeName = "pv-b"
			c.Status.Phase = v1.ClaimBound
			_, err = env.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), c, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}()
	env.createPod(pod("uses-delayed", 100, 0, withClaim("delayed")))
	if n := env.waitScheduled("default", "uses-delayed"); n != "b" {
		t.Errorf("pod with a WaitForFirstConsumer claim placed on %q, want b", n)
	}

	env.createPod(pod("missing", 100, 0, withClaim("nope")))
	if _, msg := env.waitUnschedulable("default", "missing"); msg != `0/2 nodes are available: persistentvolumeclaim "nope" not found. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..` {
		t.Errorf("message %q", msg)
	}
}

func TestPriorityClassWithoutAdmission(t *testing.T) {
	// The apiserver did not fill spec.priority: the scheduler resolves the class itself,
	// so the high-priority pod still preempts.
	env := startScheduler(t, nil,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "critical"}, Value: 1000},
		node("n1", 1000, 4096),
		pod("low", 1000, 0, onNode("n1")),
	)
	env.createPod(pod("vip", 1000, 0, func(p *v1.Pod) { p.Spec.PriorityClassName = "critical" }))
	if n := env.waitScheduled("default", "vip"); n != "n1" {
		t.Errorf("vip placed on %q", n)
	}
	if _, err := env.client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{}); err == nil {
		t.Error("low-priority pod was not preempted")
	}
}

func TestFailedBindForgetsAndRetries(t *testing.T) {
	client := fake.NewClientset(node("n1", 1000, 4096))
	env := startSchedulerWith(t, client, nil)
	var mu sync.Mutex
	failures := 0
	// The first binding is rejected by the "apiserver": the pod must be forgotten by the
	// cache and retried. The reactor goes in front of the binding emulation, under the
	// fake's lock since the scheduler is already running.
	client.Lock()
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			failures++
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sad"))
		}
		return false, nil, nil
	})
	client.Unlock()

	env.createPod(pod("p", 800, 0))
	if n := env.waitScheduled("default", "p"); n != "n1" {
		t.Errorf("placed on %q", n)
	}
	mu.Lock()
	if failures != 1 {
		t.Errorf("binding failed %d times, want 1", failures)
	}
	mu.Unlock()
	// p is counted exactly once: 200m more fits, 300m more does not.
	env.createPod(pod("fits", 200, 0))
	env.createPod(pod("too-much", 300, 0))
	env.waitScheduled("default", "fits")
	if _, msg := env.waitUnschedulable("default", "too-much"); !strings.HasPrefix(msg, "0/1 nodes are available: 1 Insufficient cpu.") {
		t.Errorf("too-much: %q", msg)
	}
}

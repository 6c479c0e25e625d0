package nodelifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/controller/util"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const grace = 40 * time.Second

func readyNode(name string, status corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(t0.Add(-time.Minute))},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(t0.Add(-time.Minute))},
		}},
	}
}

func lease(node string, renewed time.Time) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: node}, Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
}

func runningPod(name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Tolerations: tolerations},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

type fixture struct {
	client *fake.Clientset
	inf    informers.SharedInformerFactory
	c      *Controller
	te     *TaintEviction
	clock  time.Time
	events *record.FakeRecorder
}

// newFixture observes objs plus a healthy node "peer", so the cluster is never entirely
// down (when it is, no NoExecute taint is placed at all; see TestZoneAwareTainting).
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newClusterFixture(t, EvictionOptions{}, append(objs, readyNode("peer", corev1.ConditionTrue))...)
}

// newClusterFixture observes exactly objs, with the given eviction pacing.
func newClusterFixture(t *testing.T, eviction EvictionOptions, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	inf := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, inf.Core().V1().Nodes(), inf.Coordination().V1().Leases(), inf.Core().V1().Pods(), grace, eviction)
	if err != nil {
		t.Fatal(err)
	}
	te, err := NewTaintEviction(client, inf.Core().V1().Nodes(), inf.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: client, inf: inf, c: c, te: te, clock: t0, events: record.NewFakeRecorder(100)}
	c.recorder, te.recorder = f.events, f.events
	c.now = func() time.Time { return f.clock }
	te.now = func() time.Time { return f.clock }
	for _, o := range objs {
		f.observe(o)
	}
	client.ClearActions()
	return f
}

func (f *fixture) observe(o runtime.Object) {
	switch o.(type) {
	case *corev1.Node:
		f.inf.Core().V1().Nodes().Informer().GetIndexer().Update(o)
	case *corev1.Pod:
		f.inf.Core().V1().Pods().Informer().GetIndexer().Update(o)
	case *coordinationv1.Lease:
		f.inf.Coordination().V1().Leases().Informer().GetIndexer().Update(o)
	}
}

func (f *fixture) node(t *testing.T, name string) *corev1.Node {
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func taintKeys(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}

func TestSilentNodeBecomesUnknownAndTainted(t *testing.T) {
	f := newFixture(t, readyNode("n1", corev1.ConditionTrue), lease("n1", t0.Add(-time.Second)), runningPod("web", "n1",
		corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}))
	ctx := context.Background()

	// First look: the heartbeat is noted; nothing happens.
	if err := f.c.sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("writes %v on first observation", f.client.Actions())
	}

	// 30s later the lease was renewed: still healthy.
	f.clock = t0.Add(30 * time.Second)
	f.observe(lease("n1", t0.Add(29*time.Second)))
	if err := f.c.sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("writes %v for a node that renewed its lease", f.client.Actions())
	}

	// Then the kubelet goes silent for longer than the grace period.
	f.clock = t0.Add(30*time.Second + grace + time.Second)
	if err := f.c.sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	n := f.node(t, "n1")
	f.observe(n)
	err := f.te.sync(ctx, "n1")
	var later *util.RequeueAfterError
	if !errors.As(err, &later) {
		t.Fatalf("taint eviction sync: %v, want a requeue for the pod's toleration", err)
	}
	for _, cond := range n.Status.Conditions {
		reason, message := "NodeStatusUnknown", "Kubelet stopped posting node status."
		if cond.Type == corev1.NodeDiskPressure || cond.Type == corev1.NodePIDPressure {
			reason, message = "NodeStatusNeverUpdated", "Kubelet never posted node status."
		}
		if cond.Status != corev1.ConditionUnknown || cond.Reason != reason || cond.Message != message {
			t.Errorf("condition %s = %s/%s/%q, want Unknown/%s/%q", cond.Type, cond.Status, cond.Reason, cond.Message, reason, message)
		}
	}
	if len(n.Status.Conditions) != 4 {
		t.Errorf("conditions %d, want Ready, MemoryPressure and the never-reported DiskPressure, PIDPressure", len(n.Status.Conditions))
	}
	if got := taintKeys(n); !slices.Equal(got, []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}) {
		t.Errorf("taints %v", got)
	}
	pod, _ := f.client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if pod.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("pod on the unreachable node still Ready")
	}
	if later.After != 300*time.Second {
		t.Errorf("requeue after %s, want the pod's 300s toleration", later.After)
	}
}

func TestTaintsFollowReadiness(t *testing.T) {
	unreachable := []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}, {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	custom := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		story string
		node  *corev1.Node
		want  []string // nil: no write
	}{
		{"a node reporting Ready=False is tainted not-ready", readyNode("n1", corev1.ConditionFalse),
			[]string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}},
		{"a node Ready again loses the unreachable taints, keeping others", readyNode("n1", corev1.ConditionTrue, append(unreachable, custom)...),
			[]string{"dedicated:NoSchedule"}},
		{"unreachable turning into not-ready swaps the taints", readyNode("n1", corev1.ConditionFalse, unreachable...),
			[]string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}},
		{"a healthy node without taints is left alone", readyNode("n1", corev1.ConditionTrue), nil},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) { syncTaints(t, tt.node, tt.want) })
	}
}

// syncTaints syncs node n1 (with a fresh Lease) and checks its taints' keys and
// effects against want, or, when want is nil, that nothing was written. It returns
// the node as stored.
func syncTaints(t *testing.T, node *corev1.Node, want []string) *corev1.Node {
	t.Helper()
	f := newFixture(t, node, lease("n1", t0))
	if err := f.c.sync(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	if want == nil {
		if len(f.client.Actions()) != 0 {
			t.Fatalf("writes %v", f.client.Actions())
		}
		return node
	}
	stored := f.node(t, "n1")
	if got := taintKeys(stored); !slices.Equal(got, want) {
		t.Errorf("taints %v, want %v", got, want)
	}
	return stored
}

// TestTaintsFollowConditions: the pressure and network conditions and a cordon put
// their NoSchedule taints on the node, and take them off when they end, as upstream's
// TaintNodesByCondition.
func TestTaintsFollowConditions(t *testing.T) {
	with := func(n *corev1.Node, change func(*corev1.Node)) *corev1.Node {
		change(n)
		return n
	}
	condition := func(c corev1.NodeConditionType, s corev1.ConditionStatus) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: s})
		}
	}
	noSchedule := func(key string) corev1.Taint { return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule} }
	custom := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		story string
		node  *corev1.Node
		want  []string // nil: no write
	}{
		{"disk pressure", with(readyNode("n1", corev1.ConditionTrue), condition(corev1.NodeDiskPressure, corev1.ConditionTrue)),
			[]string{"node.kubernetes.io/disk-pressure:NoSchedule"}},
		{"memory pressure (the condition turned True)", with(readyNode("n1", corev1.ConditionTrue), func(n *corev1.Node) {
			n.Status.Conditions[1].Status = corev1.ConditionTrue
		}), []string{"node.kubernetes.io/memory-pressure:NoSchedule"}},
		{"PID pressure and no network, beside a taint of the user's", with(readyNode("n1", corev1.ConditionTrue, custom), func(n *corev1.Node) {
			condition(corev1.NodePIDPressure, corev1.ConditionTrue)(n)
			condition(corev1.NodeNetworkUnavailable, corev1.ConditionTrue)(n)
		}), []string{"dedicated:NoSchedule", "node.kubernetes.io/network-unavailable:NoSchedule", "node.kubernetes.io/pid-pressure:NoSchedule"}},
		{"a cordoned node", with(readyNode("n1", corev1.ConditionTrue), func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			[]string{"node.kubernetes.io/unschedulable:NoSchedule"}},
		{"pressure over and the cordon lifted: the taints go, the user's stays",
			readyNode("n1", corev1.ConditionTrue, noSchedule(corev1.TaintNodeMemoryPressure), noSchedule(corev1.TaintNodeUnschedulable), custom),
			[]string{"dedicated:NoSchedule"}},
		{"a taint already in place is left alone", with(readyNode("n1", corev1.ConditionTrue, noSchedule(corev1.TaintNodeDiskPressure)),
			condition(corev1.NodeDiskPressure, corev1.ConditionTrue)), nil},
		{"a not-ready node under disk pressure gets both", with(readyNode("n1", corev1.ConditionFalse), condition(corev1.NodeDiskPressure, corev1.ConditionTrue)),
			[]string{"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			node := syncTaints(t, tt.node, tt.want)
			if tt.want == nil {
				return
			}
			for _, taint := range node.Spec.Taints {
				if isConditionTaint(taint) && (taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(t0)) {
					t.Errorf("taint %s added at %v, want the controller's time %v", taint.Key, taint.TimeAdded, t0)
				}
			}
		})
	}
}

func TestPodsAreEvictedWhenTolerationRunsOut(t *testing.T) {
	tainted := metav1.NewTime(t0.Add(-100 * time.Second))
	node := readyNode("n1", corev1.ConditionFalse,
		corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &tainted})
	tolerate := func(seconds *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
	}
	f := newFixture(t, node, lease("n1", t0),
		runningPod("intolerant", "n1"),
		runningPod("short-toleration", "n1", tolerate(ptr(int64(60)))),
		runningPod("long-toleration", "n1", tolerate(ptr(int64(300)))),
		runningPod("forever", "n1", tolerate(nil)),
		runningPod("tolerates-everything", "n1", corev1.Toleration{Operator: corev1.TolerationOpExists}),
		runningPod("elsewhere", "n2"))
	err := f.te.sync(context.Background(), "n1")
	var later *util.RequeueAfterError
	if !errors.As(err, &later) || later.After != 200*time.Second {
		t.Fatalf("sync: %v, want a requeue in 200s for long-toleration", err)
	}
	var deleted []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			deleted = append(deleted, d.GetName())
		}
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"intolerant", "short-toleration"}) {
		t.Errorf("evicted %v, want intolerant and short-toleration", deleted)
	}
	if f.node(t, "n1").Spec.Taints[1].TimeAdded == nil {
		t.Error("existing NoExecute taint lost its timeAdded")
	}
}

func ptr[T any](v T) *T { return &v }

package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/controller/util"
)

func inZone(zone string, n *corev1.Node) *corev1.Node {
	n.Labels = map[string]string{corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: zone}
	return n
}

func zoneNodes(zone string, ready, notReady int) []runtime.Object {
	var out []runtime.Object
	for i := range ready {
		out = append(out, inZone(zone, readyNode(fmt.Sprintf("%s-ok-%d", zone, i), corev1.ConditionTrue)))
	}
	for i := range notReady {
		out = append(out, inZone(zone, readyNode(fmt.Sprintf("%s-down-%d", zone, i), corev1.ConditionFalse)))
	}
	return out
}

// step is one sync of a node at an offset from t0 and what the user then sees.
type step struct {
	at        time.Duration
	node      string
	noExecute bool          // the node carries the not-ready NoExecute taint afterwards
	requeue   time.Duration // the controller asks to look again after this (0: no requeue)
}

func TestZoneAwareTainting(t *testing.T) {
	taintedNotReady := func(n *corev1.Node) *corev1.Node {
		added := metav1.NewTime(t0.Add(-time.Minute))
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
		return n
	}
	tests := []struct {
		story    string
		eviction EvictionOptions
		nodes    []runtime.Object
		steps    []step
	}{
		{"when no node of the cluster is Ready, none gets a NoExecute taint",
			EvictionOptions{}, zoneNodes("a", 0, 2),
			[]step{{node: "a-down-0", requeue: monitorPeriod}, {node: "a-down-1", requeue: monitorPeriod}}},
		{"when no node of the cluster is Ready, NoExecute taints already placed are withdrawn",
			EvictionOptions{}, []runtime.Object{taintedNotReady(readyNode("only", corev1.ConditionFalse))},
			[]step{{node: "only", requeue: monitorPeriod}}},
		{"a healthy zone taints one node at once and the next after 1/rate seconds",
			EvictionOptions{Rate: 0.1}, zoneNodes("a", 3, 2),
			[]step{{node: "a-down-0", noExecute: true}, {node: "a-down-1", requeue: 10 * time.Second},
				{at: 4 * time.Second, node: "a-down-1", requeue: 6 * time.Second},
				{at: 10 * time.Second, node: "a-down-1", noExecute: true}}},
		{"a node already tainted keeps its taint whatever the rate",
			EvictionOptions{Rate: 0.1}, append(zoneNodes("a", 3, 1), inZone("a", taintedNotReady(readyNode("tainted", corev1.ConditionFalse)))),
			[]step{{node: "a-down-0", noExecute: true}, {node: "tainted", noExecute: true}}},
		{"a small partially disrupted zone stops tainting",
			EvictionOptions{}, append(zoneNodes("a", 1, 3), zoneNodes("b", 1, 0)...),
			[]step{{node: "a-down-0", requeue: monitorPeriod}}},
		{"a large partially disrupted zone taints at the secondary rate",
			EvictionOptions{SecondaryRate: 0.01, LargeClusterSizeThreshold: 3}, zoneNodes("a", 1, 3),
			[]step{{node: "a-down-0", noExecute: true}, {node: "a-down-1", requeue: 100 * time.Second}}},
		{"a fully disrupted zone beside a healthy one taints at the normal rate",
			EvictionOptions{Rate: 1}, append(zoneNodes("a", 0, 3), zoneNodes("b", 1, 0)...),
			[]step{{node: "a-down-0", noExecute: true}, {node: "a-down-1", requeue: time.Second},
				{at: time.Second, node: "a-down-1", noExecute: true}}},
		{"a rate of 0 on the command line (negative here) taints nothing",
			EvictionOptions{Rate: -1}, zoneNodes("a", 3, 1),
			[]step{{node: "a-down-0", requeue: monitorPeriod}}},
		{"zones are paced independently",
			EvictionOptions{Rate: 0.1}, append(zoneNodes("a", 2, 1), zoneNodes("b", 2, 1)...),
			[]step{{node: "a-down-0", noExecute: true}, {node: "b-down-0", noExecute: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newClusterFixture(t, tt.eviction, tt.nodes...)
			for i, s := range tt.steps {
				f.clock = t0.Add(s.at)
				err := f.c.sync(context.Background(), s.node)
				var later *util.RequeueAfterError
				switch {
				case s.requeue == 0 && err != nil:
					t.Fatalf("step %d: sync %s: %v", i, s.node, err)
				case s.requeue != 0 && (!errors.As(err, &later) || later.After != s.requeue):
					t.Fatalf("step %d: sync %s: %v, want a requeue after %s", i, s.node, err, s.requeue)
				}
				got := taintKeys(f.node(t, s.node))
				want := []string{"node.kubernetes.io/not-ready:NoSchedule"}
				if s.noExecute {
					want = []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}
				}
				if !slices.Equal(got, want) {
					t.Errorf("step %d: %s taints %v, want %v", i, s.node, got, want)
				}
				f.observe(f.node(t, s.node))
			}
		})
	}
}

func TestZoneStates(t *testing.T) {
	tests := []struct {
		ready, notReady int
		want            zoneState
	}{
		{3, 0, zoneNormal},
		{0, 1, zoneFullDisruption},
		{1, 2, zoneNormal},            // fewer than three not Ready never counts
		{2, 3, zonePartialDisruption}, // 60% >= 55%
		{3, 3, zoneNormal},            // 50%
		{0, 0, zoneNormal},
	}
	for _, tt := range tests {
		if got := (zoneCount{tt.ready, tt.notReady}).state(0.55); got != tt.want {
			t.Errorf("%d ready, %d not: %s, want %s", tt.ready, tt.notReady, got, tt.want)
		}
	}
}

func TestNodeLifecycleEvents(t *testing.T) {
	f := newFixture(t, readyNode("n1", corev1.ConditionTrue), lease("n1", t0), runningPod("web", "n1"))
	ctx := context.Background()
	sync := func(at time.Duration) {
		t.Helper()
		f.clock = t0.Add(at)
		var later *util.RequeueAfterError
		if err := f.c.sync(ctx, "n1"); err != nil && !errors.As(err, &later) {
			t.Fatal(err)
		}
	}
	sync(0)
	sync(grace + time.Second) // silent: Unknown, tainted, pod not ready
	f.observe(f.node(t, "n1"))
	var later *util.RequeueAfterError
	if err := f.te.sync(ctx, "n1"); err != nil && !errors.As(err, &later) { // the pod evicted
		t.Fatal(err)
	}
	if err := f.inf.Core().V1().Nodes().Informer().GetIndexer().Delete(f.node(t, "n1")); err != nil {
		t.Fatal(err)
	}
	sync(grace + 2*time.Second)

	want := []string{
		"Normal RegisteredNode Registered Node n1 in Controller",
		"Normal NodeNotReady Node n1 status is now: NodeNotReady",
		"Warning NodeNotReady Node is not ready",
		"Normal TaintManagerEviction Marking for deletion Pod default/web",
		"Normal RemovingNode Removing Node n1 from Controller",
	}
	var got []string
	for len(f.events.Events) > 0 {
		got = append(got, <-f.events.Events)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events\n%q\nwant\n%q", got, want)
	}
}

package cache

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func mkNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("110"),
	}}}
}

func mkPod(name, node string, milliCPU int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)}}}}},
	}
}

// requested reads the snapshot's cpu requested per node after refreshing it.
func requested(c *Cache, snap *Snapshot) map[string]int64 {
	c.UpdateSnapshot(snap)
	out := map[string]int64{}
	for _, ni := range snap.List() {
		out[ni.Node().Name] = ni.Requested.MilliCPU
	}
	return out
}

func TestCacheLifecycle(t *testing.T) {
	type step struct {
		do   func(c *Cache) error
		want map[string]int64
		// assumed names a pod expected to be (or not) assumed after the step.
		assumed     string
		wantAssumed bool
		wantErr     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "assume, confirm by informer, delete",
			steps: []step{
				{do: func(c *Cache) error { c.AddNode(mkNode("n1")); c.AddNode(mkNode("n2")); return nil }, want: map[string]int64{"n1": 0, "n2": 0}},
				{do: func(c *Cache) error { return c.AssumePod(mkPod("p", "n1", 500)) }, want: map[string]int64{"n1": 500, "n2": 0}, assumed: "p", wantAssumed: true},
				{do: func(c *Cache) error { c.FinishBinding(mkPod("p", "n1", 500)); return nil }, want: map[string]int64{"n1": 500, "n2": 0}, assumed: "p", wantAssumed: true},
				{do: func(c *Cache) error { c.AddPod(mkPod("p", "n1", 500)); return nil }, want: map[string]int64{"n1": 500, "n2": 0}, assumed: "p", wantAssumed: false},
				{do: func(c *Cache) error { c.RemovePod(mkPod("p", "n1", 500)); return nil }, want: map[string]int64{"n1": 0, "n2": 0}},
			},
		},
		{
			name: "failed bind forgets the assumed pod",
			steps: []step{
				{do: func(c *Cache) error { c.AddNode(mkNode("n1")); return nil }, want: map[string]int64{"n1": 0}},
				{do: func(c *Cache) error { return c.AssumePod(mkPod("p", "n1", 700)) }, want: map[string]int64{"n1": 700}},
				{do: func(c *Cache) error { return c.ForgetPod(mkPod("p", "n1", 700)) }, want: map[string]int64{"n1": 0}, assumed: "p", wantAssumed: false},
				{do: func(c *Cache) error { return c.ForgetPod(mkPod("p", "n1", 700)) }, want: map[string]int64{"n1": 0}, wantErr: true},
			},
		},
		{
			name: "someone else bound the assumed pod elsewhere",
			steps: []step{
				{do: func(c *Cache) error { c.AddNode(mkNode("n1")); c.AddNode(mkNode("n2")); return nil }, want: map[string]int64{"n1": 0, "n2": 0}},
				{do: func(c *Cache) error { return c.AssumePod(mkPod("p", "n1", 300)) }, want: map[string]int64{"n1": 300, "n2": 0}},
				{do: func(c *Cache) error { c.AddPod(mkPod("p", "n2", 300)); return nil }, want: map[string]int64{"n1": 0, "n2": 300}},
			},
		},
		{
			name: "assuming twice is an error",
			steps: []step{
				{do: func(c *Cache) error { c.AddNode(mkNode("n1")); return c.AssumePod(mkPod("p", "n1", 100)) }, want: map[string]int64{"n1": 100}},
				{do: func(c *Cache) error { return c.AssumePod(mkPod("p", "n1", 100)) }, want: map[string]int64{"n1": 100}, wantErr: true},
			},
		},
		{
			name: "pods before their node, node removal and update",
			steps: []step{
				{do: func(c *Cache) error { c.AddPod(mkPod("early", "n1", 200)); return nil }, want: map[string]int64{}},
				{do: func(c *Cache) error { c.AddNode(mkNode("n1")); return nil }, want: map[string]int64{"n1": 200}},
				{do: func(c *Cache) error { c.UpdatePod(mkPod("early", "n1", 200), mkPod("early", "n1", 100)); return nil }, want: map[string]int64{"n1": 100}},
				{do: func(c *Cache) error { c.RemoveNode(mkNode("n1")); return nil }, want: map[string]int64{}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			snap := NewEmptySnapshot()
			for i, s := range tt.steps {
				err := s.do(c)
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d: err %v, wantErr %v", i, err, s.wantErr)
				}
				got := requested(c, snap)
				if len(got) != len(s.want) {
					t.Fatalf("step %d: nodes %v, want %v", i, got, s.want)
				}
				for n, v := range s.want {
					if got[n] != v {
						t.Fatalf("step %d: node %s requested %dm, want %dm", i, n, got[n], v)
					}
				}
				if s.assumed != "" && c.IsAssumedPod(mkPod(s.assumed, "", 0)) != s.wantAssumed {
					t.Fatalf("step %d: assumed(%s) = %v, want %v", i, s.assumed, !s.wantAssumed, s.wantAssumed)
				}
			}
		})
	}
}

func TestSnapshotIsIsolatedAndIncremental(t *testing.T) {
	c := New()
	c.AddNode(mkNode("n1"))
	c.AddNode(mkNode("n2"))
	snap := NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	n2Before, _ := snap.Get("n2")

	// Cache changes do not leak into a snapshot until it is refreshed.
	if err := c.AssumePod(mkPod("p", "n1", 1000)); err != nil {
		t.Fatal(err)
	}
	n1, _ := snap.Get("n1")
	if n1.Requested.MilliCPU != 0 {
		t.Fatalf("snapshot changed before refresh: %d", n1.Requested.MilliCPU)
	}
	c.UpdateSnapshot(snap)
	n1, _ = snap.Get("n1")
	if n1.Requested.MilliCPU != 1000 || len(n1.Pods) != 1 {
		t.Fatalf("after refresh: %dm, %d pods", n1.Requested.MilliCPU, len(n1.Pods))
	}
	// Unchanged nodes are not copied again.
	if n2After, _ := snap.Get("n2"); n2After != n2Before {
		t.Error("unchanged node n2 was re-cloned")
	}
	if snap.NumNodes() != 2 {
		t.Errorf("NumNodes = %d", snap.NumNodes())
	}
}

func TestImageStatesCountNodes(t *testing.T) {
	c := New()
	for _, name := range []string{"n1", "n2"} {
		n := mkNode(name)
		n.Status.Images = []v1.ContainerImage{{Names: []string{"img:1"}, SizeBytes: 100}}
		c.AddNode(n)
	}
	snap := NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	ni, _ := snap.Get("n1")
	if st := ni.ImageStates["img:1"]; st == nil || st.NumNodes != 2 || st.Size != 100 {
		t.Errorf("image state %+v, want 2 nodes of size 100", st)
	}
}

// The snapshot's lists of nodes hosting pods with (anti-)affinity follow pods as they
// come and go, and hold the current version of each node.
func TestSnapshotAffinityLists(t *testing.T) {
	withAntiAffinity := func(name, node string) *v1.Pod {
		p := mkPod(name, node, 100)
		p.Labels = map[string]string{"app": "a"}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, TopologyKey: v1.LabelHostname}}}}
		return p
	}
	c := New()
	snap := NewEmptySnapshot()
	steps := []struct {
		name      string
		do        func()
		wantNodes []string // nodes in HavePodsWithRequiredAntiAffinityList, in order
		wantPods  map[string]int
	}{
		{name: "nodes only", do: func() { c.AddNode(mkNode("n1")); c.AddNode(mkNode("n2")); c.AddNode(mkNode("n3")) }, wantPods: map[string]int{}},
		{name: "anti-affinity pod on n2", do: func() { c.AddPod(withAntiAffinity("a1", "n2")) }, wantNodes: []string{"n2"}, wantPods: map[string]int{"n2": 1}},
		{name: "plain pod on n1 leaves the list alone", do: func() { c.AddPod(mkPod("p1", "n1", 100)) }, wantNodes: []string{"n2"}, wantPods: map[string]int{"n2": 1}},
		{name: "second one on n2 and one on n1", do: func() { c.AddPod(withAntiAffinity("a2", "n2")); c.AddPod(withAntiAffinity("a3", "n1")) },
			wantNodes: []string{"n1", "n2"}, wantPods: map[string]int{"n1": 1, "n2": 2}},
		{name: "n2's pods leave", do: func() { c.RemovePod(withAntiAffinity("a1", "n2")); c.RemovePod(withAntiAffinity("a2", "n2")) },
			wantNodes: []string{"n1"}, wantPods: map[string]int{"n1": 1}},
	}
	for _, st := range steps {
		st.do()
		c.UpdateSnapshot(snap)
		var nodes []string
		pods := map[string]int{}
		for _, ni := range snap.HavePodsWithRequiredAntiAffinityList() {
			nodes = append(nodes, ni.Node().Name)
			pods[ni.Node().Name] = len(ni.PodsWithRequiredAntiAffinity)
		}
		if !reflect.DeepEqual(nodes, st.wantNodes) || !reflect.DeepEqual(pods, st.wantPods) {
			t.Errorf("%s: nodes %v with pods %v, want %v with %v", st.name, nodes, pods, st.wantNodes, st.wantPods)
		}
		for _, ni := range snap.List() {
			if got, _ := snap.Get(ni.Node().Name); got != ni {
				t.Errorf("%s: List and Get disagree on %s", st.name, ni.Node().Name)
			}
		}
	}
}

package plugins

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"mizzen/internal/scheduler/cache"
	"mizzen/internal/scheduler/framework"
)

// testHandle gives plugins a snapshot built from nodes and pods, and runs filters of
// the plugins under test for preemption simulations.
type testHandle struct {
	snapshot *cache.Snapshot
	factory  informers.SharedInformerFactory
	client   kubernetes.Interface
	filters  []framework.FilterPlugin
	pre      []framework.PreFilterPlugin
	recorder events.EventRecorder
	// activated receives the pods plugins activate, when not nil.
	activated chan *v1.Pod
}

func newHandle(nodes []*v1.Node, pods []*v1.Pod) *testHandle {
	c := cache.New()
	for _, n := range nodes {
		c.AddNode(n)
	}
	for _, p := range pods {
		c.AddPod(p)
	}
	snap := cache.NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	return &testHandle{snapshot: snap}
}

func (h *testHandle) SnapshotSharedLister() framework.SharedLister { return h.snapshot }
func (h *testHandle) ClientSet() kubernetes.Interface              { return h.client }
func (h *testHandle) SharedInformerFactory() informers.SharedInformerFactory {
	return h.factory
}
func (h *testHandle) EventRecorder() events.EventRecorder              { return h.recorder }
func (h *testHandle) Parallelizer() framework.Parallelizer             { return serial{} }
func (h *testHandle) NominatedPodsForNode(string) []*framework.PodInfo { return nil }
func (h *testHandle) Activate(p *v1.Pod) {
	if h.activated != nil {
		h.activated <- p
	}
}
func (h *testHandle) RunPreFilterExtensionAddPod(ctx context.Context, s *framework.CycleState, p *v1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	for _, pl := range h.pre {
		if ext := pl.PreFilterExtensions(); ext != nil {
			if st := ext.AddPod(ctx, s, p, add, ni); !st.IsSuccess() {
				return st
			}
		}
	}
	return nil
}
func (h *testHandle) RunPreFilterExtensionRemovePod(ctx context.Context, s *framework.CycleState, p *v1.Pod, rm *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	for _, pl := range h.pre {
		if ext := pl.PreFilterExtensions(); ext != nil {
			if st := ext.RemovePod(ctx, s, p, rm, ni); !st.IsSuccess() {
				return st
			}
		}
	}
	return nil
}
func (h *testHandle) RunFilterPluginsWithNominatedPods(ctx context.Context, s *framework.CycleState, p *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	for _, f := range h.filters {
		if st := f.Filter(ctx, s, p, ni); !st.IsSuccess() {
			return st
		}
	}
	return nil
}

type serial struct{}

func (serial) Until(_ context.Context, pieces int, work func(int)) {
	for i := 0; i < pieces; i++ {
		work(i)
	}
}

func mkNode(name string, milliCPU, memMi int64, labels ...string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memMi*1024*1024, resource.BinarySI),
			v1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		}},
	}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

func mkPod(name string, milliCPU, memMi int64, nodeName string, labels ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name), Labels: map[string]string{}},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "img",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}}},
	}
	if milliCPU > 0 {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)
	}
	if memMi > 0 {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(memMi*1024*1024, resource.BinarySI)
	}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	return p
}

func nodeInfo(t *testing.T, h *testHandle, name string) *framework.NodeInfo {
	t.Helper()
	ni, err := h.snapshot.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return ni
}

// statusString renders a status as "Code: reasons" for comparisons ("" for success).
func statusString(s *framework.Status) string {
	if s.IsSuccess() {
		return ""
	}
	return s.Code().String() + ": " + s.Message()
}

// runFilter runs PreFilter (when the plugin has one) and Filter for each node and
// returns the rendered statuses by node.
func runFilter(t *testing.T, pl framework.FilterPlugin, h *testHandle, pod *v1.Pod) map[string]string {
	t.Helper()
	state := framework.NewCycleState()
	if pre, ok := pl.(framework.PreFilterPlugin); ok {
		_, st := pre.PreFilter(context.Background(), state, pod)
		if st.IsSkip() {
			out := map[string]string{}
			for _, ni := range h.snapshot.List() {
				out[ni.Node().Name] = ""
			}
			return out
		}
		if !st.IsSuccess() {
			out := map[string]string{}
			for _, ni := range h.snapshot.List() {
				out[ni.Node().Name] = "PreFilter " + statusString(st)
			}
			return out
		}
	}
	out := map[string]string{}
	for _, ni := range h.snapshot.List() {
		out[ni.Node().Name] = statusString(pl.Filter(context.Background(), state, pod, ni))
	}
	return out
}

// runScore runs PreScore, Score and NormalizeScore over all nodes.
func runScore(t *testing.T, pl framework.ScorePlugin, h *testHandle, pod *v1.Pod) map[string]int64 {
	t.Helper()
	state := framework.NewCycleState()
	nodes := h.snapshot.List()
	if pre, ok := pl.(framework.PreScorePlugin); ok {
		st := pre.PreScore(context.Background(), state, pod, nodes)
		if st.IsSkip() {
			out := map[string]int64{}
			for _, ni := range nodes {
				out[ni.Node().Name] = 0
			}
			return out
		}
		if !st.IsSuccess() {
			t.Fatalf("PreScore: %v", st.AsError())
		}
	}
	scores := make([]framework.NodeScore, len(nodes))
	for i, ni := range nodes {
		s, st := pl.Score(context.Background(), state, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score: %v", st.AsError())
		}
		scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if ext := pl.ScoreExtensions(); ext != nil {
		if st := ext.NormalizeScore(context.Background(), state, pod, scores); !st.IsSuccess() {
			t.Fatal(st.AsError())
		}
	}
	out := map[string]int64{}
	for _, s := range scores {
		out[s.Name] = s.Score
	}
	return out
}

func eqMap[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

package framework

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// skippingPlugin asks to be skipped at PreFilter and rejects every node at Filter, so a
// node passes only if the framework honours the skip.
type skippingPlugin struct{}

func (skippingPlugin) Name() string { return "Skipper" }
func (skippingPlugin) PreFilter(context.Context, *CycleState, *v1.Pod) (*PreFilterResult, *Status) {
	return nil, NewStatus(Skip)
}
func (skippingPlugin) PreFilterExtensions() PreFilterExtensions { return nil }
func (skippingPlugin) Filter(context.Context, *CycleState, *v1.Pod, *NodeInfo) *Status {
	return NewStatus(Unschedulable, "Skipper ran")
}

func TestFilterHonoursSkips(t *testing.T) {
	reject := &fakePlugin{name: "A", reject: map[string]string{"n1": "no A"}}
	f, err := NewFramework(registryOf(skippingPlugin{}, reject, fakeBinder{}),
		ProfileConfig{SchedulerName: "s", MultiPoint: []string{"Skipper", "A", "Binder"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n1 := nodeInfos("n1")[0]
	tests := []struct {
		name      string
		prefilter bool   // run PreFilter first (Skipper asks to be skipped)
		alsoSkip  string // a skip added after PreFilter
		want      string // the rejection message, "" for a pass
	}{
		{name: "without PreFilter nothing is skipped", want: "Skipper ran"},
		{name: "PreFilter's skip holds", prefilter: true, want: "no A"},
		{name: "a skip added after PreFilter holds too", prefilter: true, alsoSkip: "A", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := NewCycleState()
			if tt.prefilter {
				if _, st, _ := f.RunPreFilterPlugins(ctx, state, &v1.Pod{}); !st.IsSuccess() {
					t.Fatal(st.AsError())
				}
			}
			if tt.alsoSkip != "" {
				state.SkipFilterPlugins[tt.alsoSkip] = true
			}
			for _, s := range []*CycleState{state, state.Clone()} {
				if got := f.RunFilterPlugins(ctx, s, &v1.Pod{}, n1).Message(); got != tt.want {
					t.Errorf("filter message %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestPodInfoFor(t *testing.T) {
	pod := func(cpu string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	scheduled, other := pod("100m"), pod("300m")
	state := NewCycleState()
	pi := NewPodInfo(scheduled)
	state.SetPodInfo(pi)
	if got := PodInfoFor(state, scheduled); got != pi {
		t.Errorf("the cycle's pod got a new PodInfo instead of the shared one")
	}
	if got := PodInfoFor(state.Clone(), scheduled); got != pi {
		t.Errorf("a cloned state does not share the PodInfo")
	}
	if got := PodInfoFor(state, other); got == pi || got.Requests.MilliCPU != 300 {
		t.Errorf("another pod got %+v, want its own PodInfo with 300m", got.Requests)
	}
	if got := PodInfoFor(nil, other); got.Requests.MilliCPU != 300 {
		t.Errorf("without a state: %+v, want 300m", got.Requests)
	}
}

// Score lists are recycled between calls; totals must not leak from one call to the next.
func TestRunScorePluginsAcrossCalls(t *testing.T) {
	a := &fakePlugin{name: "A", score: map[string]int64{"n1": 10, "n2": 50, "n3": 7}}
	b := &fakePlugin{name: "B", score: map[string]int64{"n1": 1, "n2": 2, "n3": 3}}
	f, err := NewFramework(registryOf(a, b, fakeBinder{}), ProfileConfig{SchedulerName: "s", MultiPoint: []string{"A", "B", "Binder"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		nodes []string
		want  []int64
	}{
		{nodes: []string{"n1", "n2", "n3"}, want: []int64{11, 52, 10}},
		{nodes: []string{"n3"}, want: []int64{10}},
		{nodes: []string{"n2", "n1"}, want: []int64{52, 11}},
	}
	for _, c := range calls {
		totals, st := f.RunScorePlugins(context.Background(), NewCycleState(), &v1.Pod{}, nodeInfos(c.nodes...))
		if !st.IsSuccess() {
			t.Fatal(st.AsError())
		}
		if !reflect.DeepEqual(totals, c.want) {
			t.Errorf("nodes %v: totals %v, want %v", c.nodes, totals, c.want)
		}
	}
}

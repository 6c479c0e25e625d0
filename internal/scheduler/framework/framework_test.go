package framework

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakePlugin implements Filter and Score (and Bind when bind is set).
type fakePlugin struct {
	name   string
	score  map[string]int64
	reject map[string]string
}

func (p *fakePlugin) Name() string { return p.name }
func (p *fakePlugin) Filter(_ context.Context, _ *CycleState, _ *v1.Pod, ni *NodeInfo) *Status {
	if r, ok := p.reject[ni.Node().Name]; ok {
		return NewStatus(Unschedulable, r)
	}
	return nil
}
func (p *fakePlugin) Score(_ context.Context, _ *CycleState, _ *v1.Pod, ni *NodeInfo) (int64, *Status) {
	return p.score[ni.Node().Name], nil
}
func (p *fakePlugin) ScoreExtensions() ScoreExtensions { return nil }

type fakeBinder struct{}

func (fakeBinder) Name() string { return "Binder" }
func (fakeBinder) Bind(context.Context, *CycleState, *v1.Pod, string) *Status {
	return nil
}

func registryOf(plugins ...Plugin) map[string]PluginFactory {
	r := map[string]PluginFactory{}
	for _, p := range plugins {
		p := p
		r[p.Name()] = func(json.RawMessage, Handle) (Plugin, error) { return p, nil }
	}
	return r
}

func nodeInfos(names ...string) []*NodeInfo {
	var out []*NodeInfo
	for _, n := range names {
		ni := NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		out = append(out, ni)
	}
	return out
}

func TestMultiPointExpansionAndWeights(t *testing.T) {
	a := &fakePlugin{name: "A", score: map[string]int64{"n1": 10, "n2": 50}, reject: map[string]string{"n3": "no A"}}
	b := &fakePlugin{name: "B", score: map[string]int64{"n1": 100, "n2": 0}}
	reg := registryOf(a, b, fakeBinder{})
	tests := []struct {
		name       string
		profile    ProfileConfig
		wantTotals []int64
		wantErr    string
	}{
		{
			name:       "multiPoint enables filter, score and bind with weights",
			profile:    ProfileConfig{SchedulerName: "s", MultiPoint: []string{"A", "B", "Binder"}, ScoreWeights: map[string]int32{"A": 2}},
			wantTotals: []int64{10*2 + 100, 50*2 + 0},
		},
		{
			name:       "score disabled for one plugin",
			profile:    ProfileConfig{SchedulerName: "s", MultiPoint: []string{"A", "B", "Binder"}, Disabled: map[string][]string{PointScore: {"B"}}},
			wantTotals: []int64{10, 50},
		},
		{
			name:    "unknown plugin",
			profile: ProfileConfig{SchedulerName: "s", MultiPoint: []string{"Nope", "Binder"}},
			wantErr: `plugin "Nope" does not exist`,
		},
		{
			name:    "explicit point a plugin does not implement",
			profile: ProfileConfig{SchedulerName: "s", MultiPoint: []string{"Binder"}, Enabled: map[string][]string{PointPermit: {"A"}}},
			wantErr: `plugin "A" does not extend permit plugin`,
		},
		{
			name:    "no binder",
			profile: ProfileConfig{SchedulerName: "s", MultiPoint: []string{"A"}},
			wantErr: "at least one bind plugin",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFramework(reg, tt.profile, Options{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pod := &v1.Pod{}
			if st := f.RunFilterPlugins(context.Background(), NewCycleState(), pod, nodeInfos("n3")[0]); st.Message() != "no A" || st.Plugin() != "A" {
				t.Errorf("filter status %q from %q", st.Message(), st.Plugin())
			}
			totals, st := f.RunScorePlugins(context.Background(), NewCycleState(), pod, nodeInfos("n1", "n2"))
			if !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			if !reflect.DeepEqual(totals, tt.wantTotals) {
				t.Errorf("totals %v, want %v", totals, tt.wantTotals)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  FitError
		want string
	}{
		{
			name: "histogram sorted as upstream",
			err: FitError{NumAllNodes: 5, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{
				"a": NewStatus(Unschedulable, "Insufficient cpu", "Insufficient memory"),
				"b": NewStatus(Unschedulable, "Insufficient cpu"),
				"c": NewStatus(UnschedulableAndUnresolvable, "node(s) were unschedulable"),
			}}},
			want: "0/5 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 Insufficient cpu.",
		},
		{
			name: "prefilter message replaces the histogram",
			err:  FitError{NumAllNodes: 2, Diagnosis: Diagnosis{PreFilterMsg: `persistentvolumeclaim "x" not found`}},
			want: `0/2 nodes are available: persistentvolumeclaim "x" not found.`,
		},
		{
			name: "postfilter message appended",
			err:  FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{"a": NewStatus(Unschedulable, "Too many pods")}}, PostFilterMsg: "preemption: x."},
			want: "0/1 nodes are available: 1 Too many pods. preemption: x..",
		},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

type waitingPermit struct{}

func (waitingPermit) Name() string { return "Gate" }
func (waitingPermit) Permit(context.Context, *CycleState, *v1.Pod, string) (*Status, time.Duration) {
	return NewStatus(Wait), time.Minute
}

func TestPermitWait(t *testing.T) {
	reg := registryOf(waitingPermit{}, fakeBinder{})
	f, err := NewFramework(reg, ProfileConfig{SchedulerName: "s", MultiPoint: []string{"Gate", "Binder"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		decide func(w *WaitingPod)
		want   Code
	}{
		{"allowed", func(w *WaitingPod) { w.Allow("Gate") }, Success},
		{"rejected", func(w *WaitingPod) { w.Reject("Gate", "not now") }, Unschedulable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tt.name, UID: "uid-" + types.UID(tt.name)}}
			if st := f.RunPermitPlugins(context.Background(), NewCycleState(), pod, "n1"); st.Code() != Wait {
				t.Fatalf("permit returned %v, want Wait", st.Code())
			}
			w := f.GetWaitingPod(pod.UID)
			if w == nil {
				t.Fatal("no waiting pod")
			}
			tt.decide(w)
			if st := f.WaitOnPermit(context.Background(), pod); st.Code() != tt.want {
				t.Errorf("WaitOnPermit = %v, want %v", st.Code(), tt.want)
			}
			if f.GetWaitingPod(pod.UID) != nil {
				t.Error("waiting pod not removed")
			}
		})
	}
}

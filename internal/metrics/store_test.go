package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeserver "mizzen/internal/kubelet/server"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func u(v uint64) *uint64 { return &v }

// reading is one container's (or the node's) figures in a fake summary.
type reading struct {
	at      time.Duration // after t0
	start   time.Duration // the container's start, after t0
	cpu     uint64        // cumulative core-nanoseconds
	ws      uint64        // working set bytes
	missing bool          // no CPU figure
}

func cpuMem(r reading) (*nodeserver.CPUStats, *nodeserver.MemoryStats) {
	at := nodeserver.SampleTime{Time: t0.Add(r.at)}
	if r.missing {
		return nil, &nodeserver.MemoryStats{Time: at, WorkingSetBytes: u(r.ws)}
	}
	return &nodeserver.CPUStats{Time: at, UsageCoreNanoSeconds: u(r.cpu)}, &nodeserver.MemoryStats{Time: at, WorkingSetBytes: u(r.ws)}
}

// summary is a node's summary with one pod default/web of the given containers.
func summary(node reading, containers map[string]reading) *nodeserver.Summary {
	sum := &nodeserver.Summary{Node: nodeserver.NodeStats{NodeName: "node-a", StartTime: metav1.NewTime(t0.Add(-time.Hour))}}
	sum.Node.CPU, sum.Node.Memory = cpuMem(node)
	pod := nodeserver.PodStats{PodRef: nodeserver.PodReference{Name: "web", Namespace: "default"}}
	for name, r := range containers {
		c := nodeserver.ContainerStats{Name: name, StartTime: metav1.NewTime(t0.Add(r.start))}
		c.CPU, c.Memory = cpuMem(r)
		pod.Containers = append(pod.Containers, c)
	}
	if len(containers) > 0 {
		sum.Pods = append(sum.Pods, pod)
	}
	return sum
}

func TestStoreRates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		scrapes   []*nodeserver.Summary
		wantNode  *Usage
		wantPod   map[string]Usage // nil: the pod has no metrics
		wantNoPod bool
	}{
		{
			name:      "one scrape is not enough for a rate",
			scrapes:   []*nodeserver.Summary{summary(reading{at: 0, cpu: 1e9, ws: 100}, map[string]reading{"app": {at: 0, cpu: 1e9, ws: 10}})},
			wantNoPod: true,
		},
		{
			name: "two scrapes give the rate between them and the latest working set",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 10e9, ws: 100}, map[string]reading{"app": {at: 0, cpu: 1e9, ws: 10}}),
				summary(reading{at: 10 * time.Second, cpu: 30e9, ws: 200}, map[string]reading{"app": {at: 10 * time.Second, cpu: 6e9, ws: 20}}),
			},
			wantNode: &Usage{Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 2e9, WorkingSet: 200},
			wantPod:  map[string]Usage{"app": {Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 5e8, WorkingSet: 20}},
		},
		{
			name: "only the last two scrapes count",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 0, ws: 1}, map[string]reading{"app": {at: 0, cpu: 0, ws: 1}}),
				summary(reading{at: 10 * time.Second, cpu: 50e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, cpu: 50e9, ws: 1}}),
				summary(reading{at: 15 * time.Second, cpu: 51e9, ws: 3}, map[string]reading{"app": {at: 15 * time.Second, cpu: 50e9, ws: 3}}),
			},
			wantNode: &Usage{Timestamp: t0.Add(15 * time.Second), Window: 5 * time.Second, NanoCores: 2e8, WorkingSet: 3},
			wantPod:  map[string]Usage{"app": {Timestamp: t0.Add(15 * time.Second), Window: 5 * time.Second, NanoCores: 0, WorkingSet: 3}},
		},
		{
			name: "a restarted container starts its counter again",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 0, ws: 1}, map[string]reading{"app": {at: 0, cpu: 9e9, ws: 1}}),
				summary(reading{at: 10 * time.Second, cpu: 10e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, start: 9 * time.Second, cpu: 1e9, ws: 1}}),
			},
			wantNode:  &Usage{Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 1e9, WorkingSet: 1},
			wantNoPod: true,
		},
		{
			name: "a pod with a container not yet sampled twice is left out",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 0, ws: 1}, map[string]reading{"app": {at: 0, cpu: 0, ws: 1}}),
				summary(reading{at: 10 * time.Second, cpu: 10e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, cpu: 1e9, ws: 1}, "sidecar": {at: 10 * time.Second, cpu: 1e9, ws: 1}}),
			},
			wantNode:  &Usage{Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 1e9, WorkingSet: 1},
			wantNoPod: true,
		},
		{
			name: "a sample the kubelet repeats does not make a zero window",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 0, ws: 1}, map[string]reading{"app": {at: 0, cpu: 0, ws: 1}}),
				summary(reading{at: 10 * time.Second, cpu: 10e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, cpu: 1e9, ws: 1}}),
				summary(reading{at: 10 * time.Second, cpu: 10e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, cpu: 1e9, ws: 1}}),
			},
			wantNode: &Usage{Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 1e9, WorkingSet: 1},
			wantPod:  map[string]Usage{"app": {Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 1e8, WorkingSet: 1}},
		},
		{
			name: "a container without CPU figures gives its pod no metrics",
			scrapes: []*nodeserver.Summary{
				summary(reading{at: 0, cpu: 0, ws: 1}, map[string]reading{"app": {at: 0, missing: true}}),
				summary(reading{at: 10 * time.Second, cpu: 10e9, ws: 1}, map[string]reading{"app": {at: 10 * time.Second, missing: true}}),
			},
			wantNode:  &Usage{Timestamp: t0.Add(10 * time.Second), Window: 10 * time.Second, NanoCores: 1e9, WorkingSet: 1},
			wantNoPod: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore()
			for _, s := range tc.scrapes {
				st.Update(map[string]*nodeserver.Summary{"node-a": s})
			}
			node, ok := st.Node("node-a")
			switch {
			case tc.wantNode == nil && ok:
				t.Errorf("node: got %+v, want none", node)
			case tc.wantNode != nil && !ok:
				t.Errorf("node: none, want %+v", *tc.wantNode)
			case tc.wantNode != nil && node != *tc.wantNode:
				t.Errorf("node: got %+v, want %+v", node, *tc.wantNode)
			}
			containers, ok := st.Pod("default", "web")
			if tc.wantNoPod {
				if ok {
					t.Errorf("pod: got %+v, want none", containers)
				}
				return
			}
			if !ok {
				t.Fatalf("pod: none, want %+v", tc.wantPod)
			}
			if len(containers) != len(tc.wantPod) {
				t.Fatalf("pod: got %+v, want %+v", containers, tc.wantPod)
			}
			for _, c := range containers {
				if want, ok := tc.wantPod[c.Name]; !ok || c.Usage != want {
					t.Errorf("container %s: got %+v, want %+v", c.Name, c.Usage, want)
				}
			}
		})
	}
}

func TestStoreForgetsWhatAScrapeNoLongerReports(t *testing.T) {
	st := NewStore()
	both := func(at time.Duration, cpu uint64) map[string]*nodeserver.Summary {
		return map[string]*nodeserver.Summary{
			"node-a": summary(reading{at: at, cpu: cpu, ws: 1}, map[string]reading{"app": {at: at, cpu: cpu, ws: 1}}),
			"node-b": summary(reading{at: at, cpu: cpu, ws: 1}, nil),
		}
	}
	st.Update(both(0, 0))
	st.Update(both(10*time.Second, 10e9))
	if _, ok := st.Node("node-b"); !ok {
		t.Fatal("node-b has no metrics after two scrapes")
	}
	// node-b fails to answer, and node-a's pod is gone.
	st.Update(map[string]*nodeserver.Summary{"node-a": summary(reading{at: 20 * time.Second, cpu: 20e9, ws: 1}, nil)})
	if _, ok := st.Node("node-b"); ok {
		t.Error("node-b still has metrics after a scrape without it")
	}
	if _, ok := st.Node("node-a"); !ok {
		t.Error("node-a lost its metrics")
	}
	if c, ok := st.Pod("default", "web"); ok {
		t.Errorf("the gone pod still has metrics: %+v", c)
	}
}

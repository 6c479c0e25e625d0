package eviction

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeMeasurer reports what the test sets.
type fakeMeasurer struct {
	mu   sync.Mutex
	node NodeStats
	pods map[types.UID]PodStats
}

func (f *fakeMeasurer) Node(context.Context) (NodeStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node, nil
}

func (f *fakeMeasurer) Pods(_ context.Context, pods []*v1.Pod) (map[types.UID]PodStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[types.UID]PodStats{}
	for _, p := range pods {
		if s, ok := f.pods[p.UID]; ok {
			out[p.UID] = s
		}
	}
	return out, nil
}

// fakeReclaimer frees disk by setting the measurer's nodefs availability.
type fakeReclaimer struct {
	m         *fakeMeasurer
	freeAfter int64
	calls     int
}

func (r *fakeReclaimer) Reclaim(context.Context) error {
	r.calls++
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	fs := *r.m.node.NodeFs
	fs.AvailableBytes = r.freeAfter
	r.m.node.NodeFs = &fs
	return nil
}

// memPod is a pod with one container "c" requesting memory (none when empty).
func memPod(name string, prio int32, request string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Priority: ptr.To(prio), Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
	if request != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(request)}
	}
	return p
}

func usingMemory(bytes int64) PodStats {
	return PodStats{Containers: []ContainerStats{{Name: "c", MemoryWorkingSet: bytes}}}
}

type eviction struct {
	pod     string
	grace   int64
	message string
}

// step moves the fake clock on by after, sets the node's measurement, syncs once and
// checks the conditions and the eviction that follow.
type step struct {
	after    time.Duration
	node     NodeStats
	conds    []v1.NodeConditionType
	evicted  string // pod name, "" for none
	grace    int64
	message  string
	reclaims int // node-level reclaims so far
}

func memory(availableMi int64) NodeStats {
	return NodeStats{Memory: &Observation{Available: availableMi * mi, Capacity: 8192 * mi}}
}

func nodefs(available, capacity int64) NodeStats {
	return NodeStats{NodeFs: &FsStats{AvailableBytes: available, CapacityBytes: capacity, InodesFree: 1000, Inodes: 1000}}
}

func TestPressureSync(t *testing.T) {
	mp := v1.NodeMemoryPressure
	pods := []*v1.Pod{memPod("guaranteed", 0, "512Mi"), memPod("besteffort", 0, ""), memPod("critical", systemCriticalPriority, "")}
	podStats := map[types.UID]PodStats{
		"uid-guaranteed": usingMemory(256 * mi), "uid-besteffort": usingMemory(64 * mi), "uid-critical": usingMemory(1024 * mi),
	}
	const hardMsg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container c was using 64Mi, request is 0, has larger consumption of memory. "
	tests := []struct {
		name       string
		flags      ThresholdFlags
		maxGrace   int64
		freeAfter  int64 // what node-level reclaim leaves available on nodefs
		steps      []step
		podsByName []*v1.Pod
	}{{
		name:  "hard memory threshold: pressure, an eviction each period, then the transition period",
		flags: ThresholdFlags{Hard: "memory.available<100Mi"},
		steps: []step{
			{node: memory(4096)},
			{after: 10 * time.Second, node: memory(80), conds: []v1.NodeConditionType{mp}, evicted: "besteffort", grace: 1, message: hardMsg},
			{after: 10 * time.Second, node: memory(200), conds: []v1.NodeConditionType{mp}},
			{after: 4*time.Minute + 40*time.Second, node: memory(200), conds: []v1.NodeConditionType{mp}},
			{after: 10 * time.Second, node: memory(200)},
		},
	}, {
		name:     "soft threshold evicts only after its grace period, with the capped grace period",
		flags:    ThresholdFlags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=1m"},
		maxGrace: 20,
		steps: []step{
			{node: memory(900), conds: []v1.NodeConditionType{mp}},
			{after: 30 * time.Second, node: memory(900), conds: []v1.NodeConditionType{mp}},
			{after: 30 * time.Second, node: memory(900), conds: []v1.NodeConditionType{mp}, evicted: "besteffort", grace: 20,
				message: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 900Mi. Container c was using 64Mi, request is 0, has larger consumption of memory. "},
		},
	}, {
		name:  "soft threshold that recovers within its grace period evicts nothing",
		flags: ThresholdFlags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=1m"},
		steps: []step{
			{node: memory(900), conds: []v1.NodeConditionType{mp}},
			{after: 30 * time.Second, node: memory(2048), conds: []v1.NodeConditionType{mp}},
			{after: 40 * time.Second, node: memory(900), conds: []v1.NodeConditionType{mp}},
		},
	}, {
		name:  "minimum reclaim keeps evicting until that much more is free",
		flags: ThresholdFlags{Hard: "memory.available<100Mi", MinimumReclaim: "memory.available=50Mi"},
		steps: []step{
			{node: memory(80), conds: []v1.NodeConditionType{mp}, evicted: "besteffort", grace: 1,
				message: hardMsg},
			{after: 10 * time.Second, node: memory(120), conds: []v1.NodeConditionType{mp}, evicted: "besteffort", grace: 1,
				message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 120Mi. Container c was using 64Mi, request is 0, has larger consumption of memory. "},
			{after: 10 * time.Second, node: memory(160), conds: []v1.NodeConditionType{mp}},
		},
	}, {
		name:      "disk pressure relieved by node-level reclaim evicts nobody",
		flags:     ThresholdFlags{Hard: "nodefs.available<10%"},
		freeAfter: 500,
		steps: []step{
			{node: nodefs(50, 1000), conds: []v1.NodeConditionType{v1.NodeDiskPressure}, reclaims: 1},
			{after: 10 * time.Second, node: nodefs(500, 1000), conds: []v1.NodeConditionType{v1.NodeDiskPressure}, reclaims: 1},
		},
	}, {
		name:      "disk pressure that reclaim cannot relieve evicts a pod",
		flags:     ThresholdFlags{Hard: "nodefs.available<10%"},
		freeAfter: 60,
		steps: []step{
			{node: nodefs(50, 1000), conds: []v1.NodeConditionType{v1.NodeDiskPressure}, reclaims: 1, evicted: "guaranteed", grace: 1,
				message: "The node was low on resource: ephemeral-storage. Threshold quantity: 100, available: 60. "},
		},
	}, {
		name:  "pid pressure",
		flags: ThresholdFlags{Hard: "pid.available<10%"},
		steps: []step{
			{node: NodeStats{PIDs: &Observation{Available: 50, Capacity: 1000}}, conds: []v1.NodeConditionType{v1.NodePIDPressure},
				evicted: "guaranteed", grace: 1, message: "The node was low on resource: pids. Threshold quantity: 100, available: 50. "},
		},
	}, {
		name:       "only critical pods: nobody is evicted",
		flags:      ThresholdFlags{Hard: "memory.available<100Mi"},
		podsByName: []*v1.Pod{memPod("critical", systemCriticalPriority, "")},
		steps:      []step{{node: memory(10), conds: []v1.NodeConditionType{mp}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			thresholds, err := ParseThresholds(tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			m := &fakeMeasurer{pods: podStats}
			reclaimer := &fakeReclaimer{m: m, freeAfter: tt.freeAfter}
			running := pods
			if tt.podsByName != nil {
				running = tt.podsByName
			}
			var got []eviction
			p, err := NewPressure(PressureOptions{
				Thresholds: thresholds, MaxPodGracePeriodSeconds: tt.maxGrace, Measurer: m, Reclaimer: reclaimer,
				Pods: func() []*v1.Pod { return running },
				Evict: func(pod *v1.Pod, grace int64, msg string) {
					got = append(got, eviction{pod.Name, grace, msg})
				},
				Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				clk.Step(s.after)
				m.mu.Lock()
				m.node = s.node
				m.mu.Unlock()
				got = nil
				p.Sync(context.Background())
				if c := p.Conditions(); !slices.Equal(c, s.conds) {
					t.Errorf("step %d: conditions %v, want %v", i, c, s.conds)
				}
				var want []eviction
				if s.evicted != "" {
					want = []eviction{{s.evicted, s.grace, s.message}}
				}
				if !slices.Equal(got, want) {
					t.Errorf("step %d: evicted %+v, want %+v", i, got, want)
				}
				if reclaimer.calls != s.reclaims {
					t.Errorf("step %d: %d node-level reclaims, want %d", i, reclaimer.calls, s.reclaims)
				}
			}
		})
	}
}

func TestRank(t *testing.T) {
	tests := []struct {
		name   string
		signal Signal
		pods   []*v1.Pod
		stats  map[types.UID]PodStats
		want   string
	}{{
		name:   "memory: over requests first, then priority, then usage above requests",
		signal: SignalMemoryAvailable,
		pods: []*v1.Pod{
			memPod("within", 0, "1Gi"), memPod("over-high-prio", 1000, "100Mi"),
			memPod("over-little", 0, "100Mi"), memPod("over-much", 0, "100Mi"),
		},
		stats: map[types.UID]PodStats{
			"uid-within": usingMemory(900 * mi), "uid-over-high-prio": usingMemory(2000 * mi),
			"uid-over-little": usingMemory(101 * mi), "uid-over-much": usingMemory(500 * mi),
		},
		want: "over-much,over-little,over-high-prio,within",
	}, {
		name:   "memory: an unmeasured pod goes first",
		signal: SignalMemoryAvailable,
		pods:   []*v1.Pod{memPod("measured", 0, ""), memPod("unmeasured", 0, "1Gi")},
		stats:  map[types.UID]PodStats{"uid-measured": usingMemory(mi)},
		want:   "unmeasured,measured",
	}, {
		name:   "ephemeral storage counts layers, logs and volumes",
		signal: SignalNodeFsAvailable,
		pods:   []*v1.Pod{memPod("layer", 0, ""), memPod("volume", 0, "")},
		stats: map[types.UID]PodStats{
			"uid-layer":  {Containers: []ContainerStats{{Name: "c", RootfsBytes: 10 * mi, LogsBytes: 5 * mi}}},
			"uid-volume": {Containers: []ContainerStats{{Name: "c", RootfsBytes: mi}}, VolumeBytes: 20 * mi},
		},
		want: "volume,layer",
	}, {
		name:   "pids: priority, then most processes",
		signal: SignalPIDAvailable,
		pods:   []*v1.Pod{memPod("few", 0, ""), memPod("many-important", 100, ""), memPod("many", 0, "")},
		stats: map[types.UID]PodStats{
			"uid-few": {Processes: 3}, "uid-many-important": {Processes: 900}, "uid-many": {Processes: 300},
		},
		want: "many,few,many-important",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := slices.Clone(tt.pods)
			rank(tt.signal, pods, tt.stats)
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			if got := strings.Join(names, ","); got != tt.want {
				t.Errorf("rank = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestEvictionMessage(t *testing.T) {
	thresholds, err := ParseThresholds(ThresholdFlags{Hard: "memory.available<100Mi,nodefs.available<10%"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[Signal]Threshold{}
	for _, th := range thresholds {
		byName[th.Signal] = th
	}
	twoContainers := memPod("p", 0, "100Mi")
	twoContainers.Spec.Containers = append(twoContainers.Spec.Containers, v1.Container{Name: "d", Image: "img"})
	tests := []struct {
		name     string
		signal   Signal
		obs      Observation
		pod      *v1.Pod
		stats    PodStats
		measured bool
		want     string
	}{{
		name: "memory, one container over its request", signal: SignalMemoryAvailable,
		obs: Observation{Available: 80 * mi, Capacity: 8192 * mi}, pod: twoContainers, measured: true,
		stats: PodStats{Containers: []ContainerStats{{Name: "c", MemoryWorkingSet: 50 * mi}, {Name: "d", MemoryWorkingSet: 300 * mi}}},
		want:  "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container d was using 300Mi, request is 0, has larger consumption of memory. ",
	}, {
		name: "memory, unmeasured pod", signal: SignalMemoryAvailable,
		obs: Observation{Available: 80 * mi, Capacity: 8192 * mi}, pod: twoContainers,
		want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. ",
	}, {
		name: "ephemeral storage, a percentage threshold", signal: SignalNodeFsAvailable,
		obs: Observation{Available: 500 * mi, Capacity: 10240 * mi}, pod: memPod("p", 0, ""), measured: true,
		stats: PodStats{Containers: []ContainerStats{{Name: "c", RootfsBytes: 3 * mi, LogsBytes: mi}}},
		// 10% is a float32, as upstream's, so 10% of 10Gi is not quite 1Gi.
		want: "The node was low on resource: ephemeral-storage. Threshold quantity: 1073741840, available: 500Mi. Container c was using 4Mi, request is 0, has larger consumption of ephemeral-storage. ",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evictionMessage(byName[tt.signal], tt.obs, tt.pod, tt.stats, tt.measured); got != tt.want {
				t.Errorf("message\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	burstable := memPod("burstable", 0, "100Mi")
	bestEffort := memPod("besteffort", 0, "")
	tolerating := memPod("tolerating", 0, "")
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := memPod("critical", systemCriticalPriority, "")
	static := memPod("static", 0, "")
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	mp, dp := v1.NodeMemoryPressure, v1.NodeDiskPressure
	tests := []struct {
		name  string
		conds []v1.NodeConditionType
		pod   *v1.Pod
		want  string
	}{
		{name: "no pressure", pod: bestEffort},
		{name: "memory pressure, burstable", conds: []v1.NodeConditionType{mp}, pod: burstable},
		{name: "memory pressure, best effort", conds: []v1.NodeConditionType{mp}, pod: bestEffort, want: "The node was low on resource: [MemoryPressure]. "},
		{name: "memory pressure, best effort tolerating it", conds: []v1.NodeConditionType{mp}, pod: tolerating},
		{name: "memory pressure, critical", conds: []v1.NodeConditionType{mp}, pod: critical},
		{name: "disk pressure, burstable", conds: []v1.NodeConditionType{dp}, pod: burstable, want: "The node was low on resource: [DiskPressure]. "},
		{name: "memory and disk pressure, tolerating memory", conds: []v1.NodeConditionType{mp, dp}, pod: tolerating,
			want: "The node was low on resource: [MemoryPressure DiskPressure]. "},
		{name: "disk pressure, static pod", conds: []v1.NodeConditionType{dp}, pod: static},
		{name: "pid pressure, burstable", conds: []v1.NodeConditionType{v1.NodePIDPressure}, pod: burstable, want: "The node was low on resource: [PIDPressure]. "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pressure{conditions: tt.conds}
			reason, msg := p.Admit(tt.pod)
			if msg != tt.want || (msg == "") != (reason == "") || reason != "" && reason != Reason {
				t.Errorf("Admit = %q, %q; want %q", reason, msg, tt.want)
			}
		})
	}
	var off *Pressure
	if reason, _ := off.Admit(bestEffort); reason != "" {
		t.Errorf("a nil manager rejected a pod: %s", reason)
	}
}

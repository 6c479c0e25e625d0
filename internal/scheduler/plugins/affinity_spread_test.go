package plugins

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/scheduler/framework"
)

func affinityTerm(key string, kv ...string) v1.PodAffinityTerm {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		sel.MatchLabels[kv[i]] = kv[i+1]
	}
	return v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: key}
}

func zones() []*v1.Node {
	return []*v1.Node{
		mkNode("a1", 4000, 4096, "zone", "a"),
		mkNode("a2", 4000, 4096, "zone", "a"),
		mkNode("b1", 4000, 4096, "zone", "b"),
		mkNode("nolabel", 4000, 4096),
	}
}

func TestInterPodAffinityFilter(t *testing.T) {
	const (
		affMiss   = "UnschedulableAndUnresolvable: node(s) didn't match pod affinity rules"
		antiMiss  = "Unschedulable: node(s) didn't match pod anti-affinity rules"
		existMiss = "Unschedulable: node(s) didn't satisfy existing pods anti-affinity rules"
	)
	withAnti := func(p *v1.Pod, terms ...v1.PodAffinityTerm) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		return p
	}
	withAff := func(p *v1.Pod, terms ...v1.PodAffinityTerm) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		return p
	}
	tests := []struct {
		name     string
		existing []*v1.Pod
		pod      *v1.Pod
		want     map[string]string
	}{
		{
			name:     "affinity to a zone with a matching pod",
			existing: []*v1.Pod{mkPod("db", 0, 0, "a2", "app", "db")},
			pod:      withAff(mkPod("p", 0, 0, ""), affinityTerm("zone", "app", "db")),
			want:     map[string]string{"a1": "", "a2": "", "b1": affMiss, "nolabel": affMiss},
		},
		{
			name: "affinity without any matching pod is unsatisfiable",
			pod:  withAff(mkPod("p", 0, 0, ""), affinityTerm("zone", "app", "db")),
			want: map[string]string{"a1": affMiss, "a2": affMiss, "b1": affMiss, "nolabel": affMiss},
		},
		{
			name: "first pod of a self-selecting group goes anywhere with the key",
			pod:  withAff(mkPod("p", 0, 0, "", "app", "db"), affinityTerm("zone", "app", "db")),
			want: map[string]string{"a1": "", "a2": "", "b1": "", "nolabel": affMiss},
		},
		{
			name:     "anti-affinity over zones",
			existing: []*v1.Pod{mkPod("web-0", 0, 0, "a1", "app", "web")},
			pod:      withAnti(mkPod("p", 0, 0, "", "app", "web"), affinityTerm("zone", "app", "web")),
			want:     map[string]string{"a1": antiMiss, "a2": antiMiss, "b1": "", "nolabel": ""},
		},
		{
			name:     "anti-affinity in other namespaces does not count",
			existing: []*v1.Pod{func() *v1.Pod { p := mkPod("web-0", 0, 0, "a1", "app", "web"); p.Namespace = "other"; return p }()},
			pod:      withAnti(mkPod("p", 0, 0, "", "app", "web"), affinityTerm("zone", "app", "web")),
			want:     map[string]string{"a1": "", "a2": "", "b1": "", "nolabel": ""},
		},
		{
			name:     "existing pod's anti-affinity",
			existing: []*v1.Pod{withAnti(mkPod("loner", 0, 0, "b1"), affinityTerm("zone", "app", "noisy"))},
			pod:      mkPod("p", 0, 0, "", "app", "noisy"),
			want:     map[string]string{"a1": "", "a2": "", "b1": existMiss, "nolabel": ""},
		},
		{
			// Upstream checks the pod's affinity first: b1 fails it and an existing pod's
			// anti-affinity, and is unresolvable, so preemption leaves it alone.
			name: "a node failing affinity and anti-affinity fails affinity",
			existing: []*v1.Pod{
				mkPod("db", 0, 0, "a2", "app", "db"),
				withAnti(mkPod("loner", 0, 0, "b1"), affinityTerm("zone", "app", "noisy")),
			},
			pod:  withAff(mkPod("p", 0, 0, "", "app", "noisy"), affinityTerm("zone", "app", "db")),
			want: map[string]string{"a1": "", "a2": "", "b1": affMiss, "nolabel": affMiss},
		},
		{
			name:     "the first pod of a self-selecting group still honours anti-affinity",
			existing: []*v1.Pod{withAnti(mkPod("loner", 0, 0, "b1"), affinityTerm("zone", "app", "db"))},
			pod:      withAff(mkPod("p", 0, 0, "", "app", "db"), affinityTerm("zone", "app", "db")),
			want:     map[string]string{"a1": "", "a2": "", "b1": existMiss, "nolabel": affMiss},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandle(zones(), tt.existing)
			pl, _ := NewInterPodAffinity(nil, h)
			if got := runFilter(t, pl.(*InterPodAffinity), h, tt.pod); !eqMap(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestInterPodAffinityScore(t *testing.T) {
	h := newHandle(zones(), []*v1.Pod{
		mkPod("cache", 0, 0, "a1", "app", "cache"),
		mkPod("noisy", 0, 0, "b1", "app", "noisy"),
	})
	p := mkPod("p", 0, 0, "")
	p.Spec.Affinity = &v1.Affinity{
		PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 10, PodAffinityTerm: affinityTerm("zone", "app", "cache")},
		}},
		PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 10, PodAffinityTerm: affinityTerm("zone", "app", "noisy")},
		}},
	}
	pl, _ := NewInterPodAffinity(nil, h)
	// Raw: zone a +10, zone b -10, nolabel 0 -> normalized over [-10, 10].
	want := map[string]int64{"a1": 100, "a2": 100, "b1": 0, "nolabel": 50}
	if got := runScore(t, pl.(*InterPodAffinity), h, p); !eqMap(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPodTopologySpreadFilter(t *testing.T) {
	const (
		skew    = "Unschedulable: node(s) didn't match pod topology spread constraints"
		missing = "UnschedulableAndUnresolvable: node(s) didn't match pod topology spread constraints (missing required label)"
	)
	constraint := func(p *v1.Pod, maxSkew int32, key string, mutate ...func(*v1.TopologySpreadConstraint)) *v1.Pod {
		c := v1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}}
		for _, m := range mutate {
			m(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		return p
	}
	tests := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		pod      *v1.Pod
		want     map[string]string
	}{
		{
			name:     "zone with more pods is rejected",
			nodes:    zones(),
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w")},
			pod:      constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone"),
			want:     map[string]string{"a1": skew, "a2": skew, "b1": "", "nolabel": missing},
		},
		{
			name:     "maxSkew 2 allows it",
			nodes:    zones(),
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w")},
			pod:      constraint(mkPod("p", 0, 0, "", "app", "w"), 2, "zone"),
			want:     map[string]string{"a1": "", "a2": "", "b1": "", "nolabel": missing},
		},
		{
			name:     "non-matching pods do not count",
			nodes:    zones(),
			existing: []*v1.Pod{mkPod("x", 0, 0, "a1", "app", "other")},
			pod:      constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone"),
			want:     map[string]string{"a1": "", "a2": "", "b1": "", "nolabel": missing},
		},
		{
			name:     "nodeAffinityPolicy Honor excludes domains the pod cannot use",
			nodes:    zones(),
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w")},
			// The pod may only use zone a: zone b is not a domain, so the minimum is zone a's 1.
			pod: func() *v1.Pod {
				p := constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone")
				p.Spec.NodeSelector = map[string]string{"zone": "a"}
				return p
			}(),
			want: map[string]string{"a1": "", "a2": "", "b1": "", "nolabel": missing},
		},
		{
			name:     "nodeAffinityPolicy Ignore counts every domain",
			nodes:    zones(),
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w")},
			pod: func() *v1.Pod {
				ignore := v1.NodeInclusionPolicyIgnore
				p := constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone", func(c *v1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore })
				p.Spec.NodeSelector = map[string]string{"zone": "a"}
				return p
			}(),
			want: map[string]string{"a1": skew, "a2": skew, "b1": "", "nolabel": missing},
		},
		{
			name: "nodeTaintsPolicy Honor excludes tainted nodes' domains",
			nodes: append(zones()[:3:3], func() *v1.Node {
				n := mkNode("c1", 4000, 4096, "zone", "c")
				n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
				return n
			}()),
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w"), mkPod("w1", 0, 0, "b1", "app", "w")},
			pod: func() *v1.Pod {
				honor := v1.NodeInclusionPolicyHonor
				return constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone", func(c *v1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor })
			}(),
			// Zone c does not count, so the minimum is 1 and every counted zone is allowed.
			want: map[string]string{"a1": "", "a2": "", "b1": "", "c1": ""},
		},
		{
			name:     "minDomains above the domain count makes the minimum 0",
			nodes:    zones()[:3],
			existing: []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w"), mkPod("w1", 0, 0, "b1", "app", "w")},
			pod: func() *v1.Pod {
				three := int32(3)
				return constraint(mkPod("p", 0, 0, "", "app", "w"), 1, "zone", func(c *v1.TopologySpreadConstraint) { c.MinDomains = &three })
			}(),
			want: map[string]string{"a1": skew, "a2": skew, "b1": skew},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandle(tt.nodes, tt.existing)
			pl, err := NewPodTopologySpread(nil, h)
			if err != nil {
				t.Fatal(err)
			}
			if got := runFilter(t, pl.(*PodTopologySpread), h, tt.pod); !eqMap(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestPodTopologySpreadScore(t *testing.T) {
	h := newHandle(zones()[:3], []*v1.Pod{
		mkPod("w0", 0, 0, "a1", "app", "w"),
		mkPod("w1", 0, 0, "a2", "app", "w"),
	})
	p := mkPod("p", 0, 0, "", "app", "w")
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}}}
	pl, _ := NewPodTopologySpread(nil, h)
	got := runScore(t, pl.(*PodTopologySpread), h, p)
	if got["b1"] != framework.MaxNodeScore || got["a1"] >= got["b1"] || got["a1"] != got["a2"] {
		t.Errorf("scores %v: want b1 (empty zone) at 100 above equal a1/a2", got)
	}
}

func TestPodTopologySpreadArgs(t *testing.T) {
	for _, tt := range []struct {
		args    string
		wantErr bool
	}{
		{``, false},
		{`{"defaultingType":"List","defaultConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}]}`, false},
		{`{"defaultingType":"System","defaultConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}]}`, true},
		{`{"defaultingType":"Other"}`, true},
	} {
		_, err := NewPodTopologySpread([]byte(tt.args), nil)
		if (err != nil) != tt.wantErr {
			t.Errorf("args %s: err %v, wantErr %v", tt.args, err, tt.wantErr)
		}
	}
}

func TestDefaultPreemptionPicksFewestLowestVictims(t *testing.T) {
	prio := func(p *v1.Pod, v int32) *v1.Pod { p.Spec.Priority = &v; return p }
	nodes := []*v1.Node{mkNode("n1", 2000, 4096), mkNode("n2", 2000, 4096), mkNode("n3", 2000, 4096)}
	existing := []*v1.Pod{
		prio(mkPod("n1-a", 1000, 0, "n1"), 5), prio(mkPod("n1-b", 1000, 0, "n1"), 5),
		prio(mkPod("n2-a", 2000, 0, "n2"), 20),
		prio(mkPod("n3-a", 2000, 0, "n3"), 500),
	}
	h := newHandle(nodes, existing)
	fit, _ := NewNodeResourcesFit(nil, h)
	h.filters = []framework.FilterPlugin{fit.(framework.FilterPlugin)}
	h.pre = []framework.PreFilterPlugin{fit.(framework.PreFilterPlugin)}
	pl := &DefaultPreemption{handle: h, percentage: 10, absolute: 100}
	preemptor := prio(mkPod("p", 2000, 0, ""), 100)

	state := framework.NewCycleState()
	fit.(framework.PreFilterPlugin).PreFilter(context.Background(), state, preemptor)
	var candidates []*candidate
	statuses := map[string]string{}
	for _, ni := range h.snapshot.List() {
		c, st := pl.selectVictimsOnNode(context.Background(), state.Clone(), preemptor, ni.Clone(), nil)
		if c != nil {
			candidates = append(candidates, c)
		} else {
			statuses[ni.Node().Name] = st.Message()
		}
	}
	if statuses["n3"] != msgNoVictims {
		t.Errorf("n3 status %q, want %q", statuses["n3"], msgNoVictims)
	}
	best := pickCandidate(candidates)
	// n1 has two victims of priority 5; n2 one of priority 20: lower highest priority wins.
	if best.node != "n1" || len(best.victims) != 2 {
		t.Errorf("picked %s with %d victims, want n1 with 2", best.node, len(best.victims))
	}
}

func TestPodTopologySpreadSystemDefaults(t *testing.T) {
	// A Service selects app=w: pods without constraints are spread by the system defaults
	// (hostname and zone, ScheduleAnyway); pods no Service selects are not.
	client := fake.NewClientset(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "w"}},
	})
	nodes := []*v1.Node{mkNode("a1", 4000, 4096, v1.LabelTopologyZone, "a"), mkNode("a2", 4000, 4096, v1.LabelTopologyZone, "a"), mkNode("b1", 4000, 4096, v1.LabelTopologyZone, "b")}
	h := newHandle(nodes, []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w"), mkPod("w1", 0, 0, "a2", "app", "w")})
	h.factory = informers.NewSharedInformerFactory(client, 0)
	pl, err := NewPodTopologySpread(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())

	got := runScore(t, pl.(*PodTopologySpread), h, mkPod("w2", 0, 0, "", "app", "w"))
	if got["b1"] != framework.MaxNodeScore || got["a1"] >= got["b1"] {
		t.Errorf("service pod scores %v: want b1 (empty zone and host) best", got)
	}
	unselected := runScore(t, pl.(*PodTopologySpread), h, mkPod("x", 0, 0, "", "app", "x"))
	if unselected["a1"] != unselected["b1"] {
		t.Errorf("pod without a service was spread: %v", unselected)
	}

	// A node without a zone label: upstream requires every key on a node only for a
	// pod's own constraints, so under the system defaults it is still scored, by its
	// hostname alone (and, empty, scores best), rather than ignored.
	nodes = append(nodes, mkNode("c1", 4000, 4096))
	h = newHandle(nodes, []*v1.Pod{mkPod("w0", 0, 0, "a1", "app", "w"), mkPod("w1", 0, 0, "a2", "app", "w")})
	h.factory = informers.NewSharedInformerFactory(client, 0)
	pl, err = NewPodTopologySpread(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())
	got = runScore(t, pl.(*PodTopologySpread), h, mkPod("w2", 0, 0, "", "app", "w"))
	if got["c1"] != framework.MaxNodeScore || got["b1"] <= got["a1"] || got["b1"] >= got["c1"] {
		t.Errorf("service pod scores with a zoneless node %v: want c1 best, then b1, then a1 and a2", got)
	}
	// A pod's own constraints still require every key: the zoneless node is not scored.
	own := mkPod("own", 0, 0, "", "app", "w")
	own.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
		WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}}}
	if got := runScore(t, pl.(*PodTopologySpread), h, own); got["c1"] != 0 || got["b1"] != framework.MaxNodeScore {
		t.Errorf("pod with its own zone constraint: scores %v, want b1 best and c1 ignored", got)
	}
}

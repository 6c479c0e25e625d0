package plugins

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/scheduler/cache"
	"mizzen/internal/scheduler/framework"
)

// evalSpread runs everything PodTopologySpread computes for pod and prints it: each
// node's Filter status, the preemption dry run's statuses (each node's pods removed one
// by one from a clone of the state, then the first added back), and the scores, raw and
// normalised, over all nodes and over a subset of them (PreScore's feasible nodes).
func evalSpread(t *testing.T, pl *PodTopologySpread, snap *cache.Snapshot, pod *v1.Pod, subset []*framework.NodeInfo) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	state := framework.NewCycleState()
	_, st := pl.PreFilter(ctx, state, pod)
	switch {
	case st.IsSkip():
		out = append(out, "prefilter skip")
	case !st.IsSuccess():
		out = append(out, "prefilter "+statusString(st))
	default:
		for _, ni := range snap.List() {
			out = append(out, fmt.Sprintf("filter %s %q", ni.Node().Name, statusString(pl.Filter(ctx, state, pod, ni))))
			if len(ni.Pods) == 0 {
				continue
			}
			dry := state.Clone()
			for _, p := range ni.Pods {
				if st := pl.RemovePod(ctx, dry, pod, p, ni); !st.IsSuccess() {
					t.Fatal(st.AsError())
				}
				for _, other := range snap.List() {
					out = append(out, fmt.Sprintf("dry run %s without %s: %s %q", ni.Node().Name, p.Pod.Name, other.Node().Name, statusString(pl.Filter(ctx, dry, pod, other))))
				}
			}
			if st := pl.AddPod(ctx, dry, pod, ni.Pods[0], ni); !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			out = append(out, fmt.Sprintf("dry run %s with %s back %q", ni.Node().Name, ni.Pods[0].Pod.Name, statusString(pl.Filter(ctx, dry, pod, ni))))
			out = append(out, fmt.Sprintf("after dry run %s %q", ni.Node().Name, statusString(pl.Filter(ctx, state, pod, ni))))
		}
	}
	for name, nodes := range map[string][]*framework.NodeInfo{"all": snap.List(), "subset": subset} {
		state := framework.NewCycleState()
		if st := pl.PreScore(ctx, state, pod, nodes); st.IsSkip() {
			out = append(out, name+" prescore skip")
			continue
		} else if !st.IsSuccess() {
			out = append(out, name+" prescore "+statusString(st))
			continue
		}
		var scores []framework.NodeScore
		for _, ni := range nodes {
			s, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			out = append(out, fmt.Sprintf("%s score %s %d", name, ni.Node().Name, s))
			scores = append(scores, framework.NodeScore{Name: ni.Node().Name, Score: s})
		}
		if st := pl.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
			t.Fatal(st.AsError())
		}
		for _, s := range scores {
			out = append(out, fmt.Sprintf("%s normalised %s %d", name, s.Name, s.Score))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// spreadProbes are incoming pods covering the constraint forms: keys a node may lack,
// several constraints (a node needs every key), minDomains, node affinity and taint
// policies, matchLabelKeys, another namespace, no selector, and soft constraints.
func spreadProbes() []*v1.Pod {
	sel := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	honor, ignore := v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore
	two := int32(2)
	four := int32(4)
	c := func(key string, skew int32, when v1.UnsatisfiableConstraintAction, s *metav1.LabelSelector, f ...func(*v1.TopologySpreadConstraint)) v1.TopologySpreadConstraint {
		tc := v1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: s}
		for _, f := range f {
			f(&tc)
		}
		return tc
	}
	pod := func(name string, cs ...v1.TopologySpreadConstraint) *v1.Pod {
		p := mkPod(name, 0, 0, "", "app", "web", "version", "v1")
		p.Spec.TopologySpreadConstraints = cs
		return p
	}
	hard, soft := v1.DoNotSchedule, v1.ScheduleAnyway
	var out []*v1.Pod
	out = append(out,
		pod("zone", c("zone", 1, hard, sel("app", "web"))),
		pod("zone-skew2", c("zone", 2, hard, sel("app", "db"))),
		pod("host", c(v1.LabelHostname, 1, hard, sel("app", "web"))),
		pod("zone-rack", c("zone", 1, hard, sel("app", "web")), c("rack", 1, hard, sel("app", "db"))),
		pod("min-domains", c("zone", 1, hard, sel("app", "web"), func(tc *v1.TopologySpreadConstraint) { tc.MinDomains = &four })),
		pod("min-domains-2", c("rack", 1, hard, sel("app", "db"), func(tc *v1.TopologySpreadConstraint) { tc.MinDomains = &two })),
		pod("taints-honored", c("zone", 1, hard, sel("app", "web"), func(tc *v1.TopologySpreadConstraint) { tc.NodeTaintsPolicy = &honor })),
		pod("affinity-ignored", c("zone", 1, hard, sel("app", "web"), func(tc *v1.TopologySpreadConstraint) { tc.NodeAffinityPolicy = &ignore })),
		pod("match-label-keys", c("zone", 1, hard, sel("app", "web"), func(tc *v1.TopologySpreadConstraint) { tc.MatchLabelKeys = []string{"version"} })),
		pod("no-selector", c("zone", 1, hard, nil)),
		pod("expression", c("zone", 1, hard, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}}}})),
		pod("soft-zone", c("zone", 2, soft, sel("app", "web"))),
		pod("soft-host-zone", c(v1.LabelHostname, 1, soft, sel("app", "web")), c("zone", 3, soft, sel("app", "db"))),
		pod("soft-taints", c("rack", 1, soft, sel("app", "web"), func(tc *v1.TopologySpreadConstraint) { tc.NodeTaintsPolicy = &honor })),
		pod("hard-and-soft", c("zone", 1, hard, sel("app", "web")), c("rack", 1, soft, sel("app", "web"))),
	)
	// The same forms with node affinity (nodeSelector), tolerations, another namespace.
	for _, p := range []*v1.Pod{out[0], out[3], out[6], out[7], out[12], out[13]} {
		q := p.DeepCopy()
		q.Name += "-selector"
		q.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		out = append(out, q)
		q = p.DeepCopy()
		q.Name += "-tolerating"
		q.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
		out = append(out, q)
		q = p.DeepCopy()
		q.Name += "-other"
		q.Namespace = "other"
		out = append(out, q)
	}
	// Pods without constraints of their own, under the system defaults (hostname and
	// zone, soft): one selected by the Service of spreadDefaultersClient, one owned by
	// its ReplicaSet, as a Deployment's pods are.
	yes := true
	owned := mkPod("system-owned", 0, 0, "", "app", "db", "version", "v1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "db", Controller: &yes}}
	out = append(out, mkPod("system-service", 0, 0, "", "app", "web", "version", "v2"), owned)
	return out
}

// spreadDefaultersClient holds the objects from which the system default constraints
// take their selectors: a Service selecting app=web and a ReplicaSet selecting app=db.
func spreadDefaultersClient() kubernetes.Interface {
	return fake.NewClientset(
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	)
}

// TestPodTopologySpreadIndexMatchesWalk drives the scheduler cache through random pod
// adds, relabels, terminations, deletes, assumes and forgets and node adds, relabels,
// retaints and removals, and after each step checks that the snapshot's spread counts
// equal a count from scratch and that PodTopologySpread reading them filters, dry-runs
// and scores every probe pod as it does walking every pod.
func TestPodTopologySpreadIndexMatchesWalk(t *testing.T) {
	probes := spreadProbes()
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			pick := func(vs ...string) string { return vs[r.Intn(len(vs))] }
			randNode := func(name string) *v1.Node {
				var kv []string
				if r.Intn(6) > 0 {
					kv = append(kv, "zone", pick("a", "b", "c", "")) // "": the key with an empty value
				}
				if r.Intn(2) > 0 { // the system defaults' zone key
					kv = append(kv, v1.LabelTopologyZone, pick("a", "b", ""))
				}
				if r.Intn(3) > 0 {
					kv = append(kv, "rack", pick("r1", "r2", "r3", "r4"))
				}
				if r.Intn(2) > 0 {
					kv = append(kv, "disk", "ssd")
				}
				n := mkNode(name, 4000, 4096, kv...)
				if r.Intn(8) == 0 {
					delete(n.Labels, v1.LabelHostname)
				}
				switch r.Intn(6) {
				case 0:
					n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
				case 1:
					n.Spec.Taints = []v1.Taint{{Key: "other", Effect: v1.TaintEffectNoExecute}}
				case 2:
					n.Spec.Taints = []v1.Taint{{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
				}
				return n
			}
			c := cache.New()
			nodes := map[string]*v1.Node{}
			for i := range 6 {
				n := randNode(fmt.Sprint("n", i))
				nodes[n.Name] = n
				c.AddNode(n)
			}
			pods := map[string]*v1.Pod{}
			assumed := map[string]bool{}
			podN, nodeN := 0, 6
			randPod := func(node string) *v1.Pod {
				podN++
				name := fmt.Sprint("p", podN)
				p := mkPod(name, 0, 0, node, "app", pick("web", "web", "db", "x"), "version", pick("v1", "v2"))
				if r.Intn(4) == 0 {
					p.Namespace = "other"
				}
				p.UID = types.UID(name)
				p.ResourceVersion = "1"
				return p
			}
			someNode := func() string {
				names := make([]string, 0, len(nodes))
				for n := range nodes {
					names = append(names, n)
				}
				sort.Strings(names)
				if len(names) == 0 || r.Intn(15) == 0 {
					return "gone" // a node the cache does not know (yet)
				}
				return names[r.Intn(len(names))]
			}
			somePod := func() *v1.Pod {
				names := make([]string, 0, len(pods))
				for n := range pods {
					names = append(names, n)
				}
				if len(names) == 0 {
					return nil
				}
				sort.Strings(names)
				return pods[names[r.Intn(len(names))]]
			}
			snap := cache.NewEmptySnapshot()
			h := &testHandle{snapshot: snap, factory: informers.NewSharedInformerFactory(spreadDefaultersClient(), 0)}
			indexed, err := NewPodTopologySpread(nil, h)
			if err != nil {
				t.Fatal(err)
			}
			walked, _ := NewPodTopologySpread(nil, walkHandle{h})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h.factory.Start(ctx.Done())
			h.factory.WaitForCacheSync(ctx.Done())
			for step := range 40 {
				var did []string
				for range 1 + r.Intn(4) {
					switch op := r.Intn(12); {
					case op < 4:
						p := randPod(someNode())
						pods[p.Name] = p
						c.AddPod(p)
						did = append(did, "add "+p.Name)
					case op == 4:
						p := randPod(someNode())
						if err := c.AssumePod(p); err != nil {
							t.Fatal(err)
						}
						pods[p.Name], assumed[p.Name] = p, true
						did = append(did, "assume "+p.Name)
					case op == 5:
						if p := somePod(); p != nil && assumed[p.Name] {
							if err := c.ForgetPod(p); err != nil {
								t.Fatal(err)
							}
							delete(pods, p.Name)
							delete(assumed, p.Name)
							did = append(did, "forget "+p.Name)
						}
					case op == 6:
						if p := somePod(); p != nil {
							q := p.DeepCopy()
							q.ResourceVersion += "1"
							if r.Intn(2) == 0 {
								q.Labels["app"] = pick("web", "db", "x")
							} else {
								now := metav1.Now()
								q.DeletionTimestamp = &now
							}
							c.UpdatePod(p, q)
							pods[q.Name] = q
							delete(assumed, q.Name)
							did = append(did, "update "+q.Name)
						}
					case op == 7:
						if p := somePod(); p != nil {
							c.RemovePod(p)
							delete(pods, p.Name)
							delete(assumed, p.Name)
							did = append(did, "remove "+p.Name)
						}
					case op == 8:
						name := fmt.Sprint("n", nodeN)
						if r.Intn(3) == 0 {
							name = "gone"
						}
						nodeN++
						n := randNode(name)
						nodes[name] = n
						c.AddNode(n)
						did = append(did, "add node "+name)
					case op == 9 || op == 10:
						if name := someNode(); nodes[name] != nil {
							n := randNode(name)
							if r.Intn(2) == 0 { // only the taints change
								n.Labels = nodes[name].Labels
							}
							nodes[name] = n
							c.UpdateNode(nil, n)
							did = append(did, "update node "+name)
						}
					default:
						if name := someNode(); nodes[name] != nil && len(nodes) > 1 {
							c.RemoveNode(nodes[name])
							delete(nodes, name)
							did = append(did, "remove node "+name)
						}
					}
				}
				c.UpdateSnapshot(snap)
				if err := snap.SpreadIndex().Check(snap.List()); err != nil {
					t.Fatalf("step %d (%v): %v", step, did, err)
				}
				var subset []*framework.NodeInfo
				for _, ni := range snap.List() {
					if r.Intn(2) == 0 {
						subset = append(subset, ni)
					}
				}
				for _, p := range probes {
					got := evalSpread(t, indexed.(*PodTopologySpread), snap, p, subset)
					want := evalSpread(t, walked.(*PodTopologySpread), snap, p, subset)
					if got != want {
						t.Fatalf("step %d (%v), pod %s: with the index\n%s\nwalking\n%s", step, did, p.Name, got, want)
					}
				}
			}
			if n := snap.SpreadIndex().Len(); n == 0 {
				t.Errorf("no spread counts kept")
			}
		})
	}
}

// BenchmarkPodTopologySpreadPreFilter is one cycle of scheduler_perf's TopologySpreading
// shape for PodTopologySpread (5,000 nodes in 3 zones, 5,000 pods placed, 2,000 of them
// matching): PreFilter, then Filter on every node; "walk" counts without the index.
func BenchmarkPodTopologySpreadPreFilter(b *testing.B) {
	c := cache.New()
	for i := range 5000 {
		c.AddNode(mkNode(fmt.Sprintf("node-%04d", i), 4000, 4096, v1.LabelTopologyZone, fmt.Sprint("moon-", i%3)))
	}
	for i := range 7000 {
		p := mkPod(fmt.Sprint("p", i), 100, 500, fmt.Sprintf("node-%04d", i%5000))
		if i >= 5000 {
			p.Labels["color"] = "blue"
		}
		c.AddPod(p)
	}
	snap := cache.NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	h := &testHandle{snapshot: snap}
	pod := mkPod("new", 100, 500, "", "color", "blue")
	pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 5, TopologyKey: v1.LabelTopologyZone,
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
	for name, handle := range map[string]framework.Handle{"index": h, "walk": walkHandle{h}} {
		b.Run(name, func(b *testing.B) {
			pl, _ := NewPodTopologySpread(nil, handle)
			pts := pl.(*PodTopologySpread)
			ctx := context.Background()
			for range b.N {
				state := framework.NewCycleState()
				if _, st := pts.PreFilter(ctx, state, pod); !st.IsSuccess() {
					b.Fatal(st.AsError())
				}
				for _, ni := range snap.List() {
					pts.Filter(ctx, state, pod, ni)
				}
			}
		})
	}
}

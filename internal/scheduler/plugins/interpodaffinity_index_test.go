package plugins

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/scheduler/cache"
	"mizzen/internal/scheduler/framework"
)

// walkLister is the snapshot without its affinity index: InterPodAffinity then counts
// by walking every pod, as upstream does.
type walkLister struct{ s *cache.Snapshot }

func (w walkLister) NodeInfos() framework.NodeInfoLister { return w }
func (w walkLister) List() []*framework.NodeInfo         { return w.s.List() }
func (w walkLister) HavePodsWithAffinityList() []*framework.NodeInfo {
	return w.s.HavePodsWithAffinityList()
}
func (w walkLister) HavePodsWithRequiredAntiAffinityList() []*framework.NodeInfo {
	return w.s.HavePodsWithRequiredAntiAffinityList()
}
func (w walkLister) Get(name string) (*framework.NodeInfo, error) { return w.s.Get(name) }

type walkHandle struct{ *testHandle }

func (h walkHandle) SnapshotSharedLister() framework.SharedLister { return walkLister{h.snapshot} }

// evalAffinity runs everything InterPodAffinity computes for pod and prints it: each
// node's Filter status and raw Score, and, as preemption's dry run does, each node's
// Filter status after removing the node's pods one by one from a clone of the state,
// and after adding the first back.
func evalAffinity(t *testing.T, pl *InterPodAffinity, snap *cache.Snapshot, pod *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	state := framework.NewCycleState()
	_, st := pl.PreFilter(ctx, state, pod)
	switch {
	case st.IsSkip():
		out = append(out, "prefilter skip")
	case !st.IsSuccess():
		return "prefilter " + statusString(st)
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
				out = append(out, fmt.Sprintf("dry run %s without %s %q", ni.Node().Name, p.Pod.Name, statusString(pl.Filter(ctx, dry, pod, ni))))
			}
			if st := pl.AddPod(ctx, dry, pod, ni.Pods[0], ni); !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			out = append(out, fmt.Sprintf("dry run %s with %s back %q", ni.Node().Name, ni.Pods[0].Pod.Name, statusString(pl.Filter(ctx, dry, pod, ni))))
			// The state the dry run changed is a clone: the original is untouched.
			out = append(out, fmt.Sprintf("after dry run %s %q", ni.Node().Name, statusString(pl.Filter(ctx, state, pod, ni))))
		}
	}
	if st := pl.PreScore(ctx, state, pod, snap.List()); st.IsSkip() {
		out = append(out, "prescore skip")
	} else {
		for _, ni := range snap.List() {
			s, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			out = append(out, fmt.Sprintf("score %s %d", ni.Node().Name, s))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestInterPodAffinityIndexMatchesWalk drives the scheduler cache through adds, label
// updates, deletes, assumes, forgets and node changes, and after each step checks, for
// a set of incoming pods, that InterPodAffinity reading the snapshot's counts decides
// and scores as it does counting by a walk over every pod, the preemption dry run
// included.
func TestInterPodAffinityIndexMatchesWalk(t *testing.T) {
	inNs := func(p *v1.Pod, ns string) *v1.Pod { p.Namespace = ns; p.UID += "-" + "ns"; return p }
	aff := func(p *v1.Pod, a *v1.Affinity) *v1.Pod { p.Spec.Affinity = a; return p }
	anti := func(terms ...v1.PodAffinityTerm) *v1.Affinity {
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	}
	with := func(t v1.PodAffinityTerm, f func(*v1.PodAffinityTerm)) v1.PodAffinityTerm { f(&t); return t }
	hostAntiWeb := with(affinityTerm(v1.LabelHostname, "app", "web"), func(t *v1.PodAffinityTerm) { t.Namespaces = []string{"default", "other"} })
	web := func(name, node string) *v1.Pod { return aff(mkPod(name, 0, 0, node, "app", "web"), anti(hostAntiWeb)) }
	zoneAntiDB := func(name, node string) *v1.Pod {
		return aff(mkPod(name, 0, 0, node, "app", "db"), anti(affinityTerm("zone", "app", "db")))
	}
	// Required affinity to cache pods in the same zone and host (both terms together).
	front := func(name, node string) *v1.Pod {
		return aff(mkPod(name, 0, 0, node, "app", "front"), &v1.Affinity{PodAffinity: &v1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{affinityTerm("zone", "app", "cache"), affinityTerm(v1.LabelHostname, "app", "cache")}}})
	}
	// Self-affinity over zones: the first of the group goes anywhere.
	group := func(name, node string) *v1.Pod {
		return aff(mkPod(name, 0, 0, node, "app", "group"), &v1.Affinity{PodAffinity: &v1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{affinityTerm("zone", "app", "group")}}})
	}
	prefer := func(name, node string) *v1.Pod {
		return aff(mkPod(name, 0, 0, node, "app", "batch"), &v1.Affinity{
			PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
				{Weight: 5, PodAffinityTerm: affinityTerm("zone", "app", "web")}}},
			PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
				{Weight: 3, PodAffinityTerm: affinityTerm(v1.LabelHostname, "app", "batch")}}},
		})
	}
	// Anti-affinity to web pods in namespaces labelled team=y (namespaceSelector).
	nsSelected := func(name, node string) *v1.Pod {
		return aff(mkPod(name, 0, 0, node, "app", "audit"), anti(with(affinityTerm(v1.LabelHostname, "app", "web"),
			func(t *v1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}
			})))
	}
	// Anti-affinity to the pods of its own version (matchLabelKeys).
	versioned := func(name, node, version string) *v1.Pod {
		p := aff(mkPod(name, 0, 0, node, "app", "api", "version", version), anti(with(affinityTerm("zone", "app", "api"),
			func(t *v1.PodAffinityTerm) { t.MatchLabelKeys = []string{"version"} })))
		return p
	}
	relabel := func(p *v1.Pod, kv ...string) *v1.Pod {
		q := p.DeepCopy()
		q.ResourceVersion = "2"
		for i := 0; i+1 < len(kv); i += 2 {
			q.Labels[kv[i]] = kv[i+1]
		}
		return q
	}
	probes := []*v1.Pod{
		web("new-web", ""), inNs(web("new-web-other", ""), "other"), zoneAntiDB("new-db", ""), front("new-front", ""),
		group("new-group", ""), prefer("new-batch", ""), nsSelected("new-audit", ""), versioned("new-api", "", "v1"),
		mkPod("plain", 0, 0, "", "app", "web"), mkPod("plain-db", 0, 0, "", "app", "db"), mkPod("cache", 0, 0, "", "app", "cache"),
	}
	steps := []struct {
		name string
		do   func(c *cache.Cache) error
	}{
		{"empty", func(*cache.Cache) error { return nil }},
		{"web pods", func(c *cache.Cache) error {
			c.AddPod(web("web-0", "a1"))
			c.AddPod(inNs(web("web-1", "b1"), "other"))
			return nil
		}},
		{"assume a web pod", func(c *cache.Cache) error { return c.AssumePod(web("web-2", "a2")) }},
		{"forget it", func(c *cache.Cache) error { return c.ForgetPod(web("web-2", "a2")) }},
		{"assume and confirm", func(c *cache.Cache) error {
			if err := c.AssumePod(web("web-2", "a2")); err != nil {
				return err
			}
			c.AddPod(web("web-2", "a2"))
			return nil
		}},
		{"db and cache pods", func(c *cache.Cache) error {
			c.AddPod(zoneAntiDB("db-0", "a1"))
			c.AddPod(mkPod("cache-0", 0, 0, "b1", "app", "cache"))
			c.AddPod(mkPod("cache-1", 0, 0, "nolabel", "app", "cache"))
			return nil
		}},
		{"front, group, batch, api pods", func(c *cache.Cache) error {
			c.AddPod(front("front-0", "b1"))
			c.AddPod(group("group-0", "a2"))
			c.AddPod(prefer("batch-0", "a1"))
			c.AddPod(versioned("api-0", "b1", "v1"))
			c.AddPod(versioned("api-1", "a1", "v2"))
			c.AddPod(nsSelected("audit-0", "a2"))
			return nil
		}},
		{"web-0 relabelled out of its group", func(c *cache.Cache) error {
			old := web("web-0", "a1")
			c.UpdatePod(old, relabel(old, "app", "retired"))
			return nil
		}},
		{"a plain pod relabelled into the db group", func(c *cache.Cache) error {
			p := mkPod("x", 0, 0, "b1", "app", "x")
			c.AddPod(p)
			c.UpdatePod(p, relabel(p, "app", "db"))
			return nil
		}},
		{"node a2 moves to zone b", func(c *cache.Cache) error { c.UpdateNode(nil, mkNode("a2", 4000, 4096, "zone", "b")); return nil }},
		{"node b1 loses its zone", func(c *cache.Cache) error { c.UpdateNode(nil, mkNode("b1", 4000, 4096)); return nil }},
		{"pods deleted", func(c *cache.Cache) error {
			c.RemovePod(zoneAntiDB("db-0", "a1"))
			c.RemovePod(mkPod("cache-0", 0, 0, "b1", "app", "cache"))
			c.RemovePod(web("web-2", "a2"))
			return nil
		}},
		{"node removed", func(c *cache.Cache) error { c.RemoveNode(mkNode("a1", 4000, 4096)); return nil }},
		{"everything deleted", func(c *cache.Cache) error {
			for _, p := range []*v1.Pod{inNs(web("web-1", "b1"), "other"), mkPod("cache-1", 0, 0, "nolabel", "app", "cache"), front("front-0", "b1"),
				group("group-0", "a2"), prefer("batch-0", "a1"), versioned("api-0", "b1", "v1"), versioned("api-1", "a1", "v2"),
				nsSelected("audit-0", "a2"), mkPod("x", 0, 0, "b1"), mkPod("web-0", 0, 0, "a1")} {
				c.RemovePod(p)
			}
			return nil
		}},
	}

	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"team": "x"}}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"team": "y"}}},
	)
	c := cache.New()
	for _, n := range zones() {
		c.AddNode(n)
	}
	snap := cache.NewEmptySnapshot()
	h := &testHandle{snapshot: snap, factory: informers.NewSharedInformerFactory(client, 0)}
	indexed, err := NewInterPodAffinity(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	walked, _ := NewInterPodAffinity(nil, walkHandle{h})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())
	for _, step := range steps {
		if err := step.do(c); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		c.UpdateSnapshot(snap)
		for _, p := range probes {
			got := evalAffinity(t, indexed.(*InterPodAffinity), snap, p)
			want := evalAffinity(t, walked.(*InterPodAffinity), snap, p)
			if got != want {
				t.Errorf("after %q, pod %s: with the index\n%s\nwalking\n%s", step.name, p.Name, got, want)
			}
		}
	}
}

// TestInterPodAffinityDryRunRemovesLastMatch: once the dry run removes the only pod
// matching a self-selecting affinity group, the incoming pod is the group's first again
// and may go to any zone, as upstream (its counts drop the emptied domain).
func TestInterPodAffinityDryRunRemovesLastMatch(t *testing.T) {
	group := func(name, node string) *v1.Pod {
		p := mkPod(name, 0, 0, node, "app", "group")
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{affinityTerm("zone", "app", "group")}}}
		return p
	}
	h := newHandle(zones(), []*v1.Pod{group("group-0", "a1")})
	for name, handle := range map[string]framework.Handle{"index": h, "walk": walkHandle{h}} {
		t.Run(name, func(t *testing.T) {
			pl, _ := NewInterPodAffinity(nil, handle)
			ipa := pl.(*InterPodAffinity)
			ctx, pod := context.Background(), group("new", "")
			state := framework.NewCycleState()
			if _, st := ipa.PreFilter(ctx, state, pod); !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			b1, a1 := nodeInfo(t, h, "b1"), nodeInfo(t, h, "a1")
			if st := ipa.Filter(ctx, state, pod, b1); st.IsSuccess() {
				t.Fatalf("b1 passes while group-0 runs in zone a")
			}
			dry := state.Clone()
			if st := ipa.RemovePod(ctx, dry, pod, a1.Pods[0], a1); !st.IsSuccess() {
				t.Fatal(st.AsError())
			}
			if st := ipa.Filter(ctx, dry, pod, b1); !st.IsSuccess() {
				t.Errorf("without group-0, b1: %s, want success (first pod of the group)", statusString(st))
			}
		})
	}
}

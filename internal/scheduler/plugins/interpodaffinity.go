package plugins

import (
	"context"
	"encoding/json"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"mizzen/internal/scheduler/framework"
)

// Reasons shown by InterPodAffinity, as upstream.
const (
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	ErrReasonAffinityRulesNotMatch             = "node(s) didn't match pod affinity rules"
	ErrReasonAntiAffinityRulesNotMatch         = "node(s) didn't match pod anti-affinity rules"
)

// InterPodAffinityArgs is the plugin's configuration.
type InterPodAffinityArgs struct {
	HardPodAffinityWeight              *int32 `json:"hardPodAffinityWeight,omitempty"`
	IgnorePreferredTermsOfExistingPods bool   `json:"ignorePreferredTermsOfExistingPods,omitempty"`
}

// InterPodAffinity enforces required pod affinity and anti-affinity (the incoming pod's
// and existing pods' anti-affinity) over any topology key, and scores preferred terms.
type InterPodAffinity struct {
	handle          framework.Handle
	nsLister        corelisters.NamespaceLister
	hardWeight      int64
	ignorePreferred bool
}

var (
	_ framework.PreFilterPlugin   = (*InterPodAffinity)(nil)
	_ framework.FilterPlugin      = (*InterPodAffinity)(nil)
	_ framework.PreScorePlugin    = (*InterPodAffinity)(nil)
	_ framework.ScorePlugin       = (*InterPodAffinity)(nil)
	_ framework.EnqueueExtensions = (*InterPodAffinity)(nil)
)

// NewInterPodAffinity is the plugin factory.
func NewInterPodAffinity(raw json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	args := InterPodAffinityArgs{}
	if err := decodeArgs(raw, InterPodAffinityName, &args); err != nil {
		return nil, err
	}
	pl := &InterPodAffinity{handle: h, hardWeight: 1, ignorePreferred: args.IgnorePreferredTermsOfExistingPods}
	if args.HardPodAffinityWeight != nil {
		pl.hardWeight = int64(*args.HardPodAffinityWeight)
	}
	if h != nil && h.SharedInformerFactory() != nil {
		pl.nsLister = h.SharedInformerFactory().Core().V1().Namespaces().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*InterPodAffinity) Name() string { return InterPodAffinityName }

// EventsToRegister: assigned pods come, go or change labels; nodes appear or are
// relabelled (topology values); namespaces change labels (namespaceSelector).
func (*InterPodAffinity) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add | framework.Delete | framework.UpdatePodLabel}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}},
		{Event: framework.ClusterEvent{Resource: framework.Namespace, ActionType: framework.Add | framework.Update}},
	}
}

// topologyPair is one topology domain, e.g. zone=us-east-1a.
type topologyPair struct {
	key, value string
}

type topologyCounts map[topologyPair]int64

func (m topologyCounts) clone() topologyCounts {
	out := make(topologyCounts, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type interPodAffinityState struct {
	podInfo  *framework.PodInfo
	nsLabels labels.Set
	// existingAntiAffinity counts, per domain, existing pods whose required anti-affinity
	// matches the incoming pod.
	existingAntiAffinity topologyCounts
	// affinity counts, per domain, existing pods matching all the pod's affinity terms.
	affinity topologyCounts
	// antiAffinity counts, per domain, existing pods matching the pod's anti-affinity terms.
	antiAffinity topologyCounts
}

func (s *interPodAffinityState) Clone() framework.StateData {
	return &interPodAffinityState{
		podInfo: s.podInfo, nsLabels: s.nsLabels,
		existingAntiAffinity: s.existingAntiAffinity.clone(),
		affinity:             s.affinity.clone(),
		antiAffinity:         s.antiAffinity.clone(),
	}
}

const interPodAffinityPreFilterKey framework.StateKey = "PreFilter" + InterPodAffinityName

func (pl *InterPodAffinity) namespaceLabels(ns string) labels.Set {
	if pl.nsLister == nil {
		return labels.Set{}
	}
	n, err := pl.nsLister.Get(ns)
	if err != nil {
		return labels.Set{}
	}
	return n.Labels
}

// termsNamespaceLabels resolves namespace labels for a pod lazily: only terms with a
// namespaceSelector need them.
type nsCache struct {
	pl *InterPodAffinity
	mu sync.Mutex
	m  map[string]labels.Set
}

func (c *nsCache) get(ns string) labels.Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.m[ns]; ok {
		return l
	}
	l := c.pl.namespaceLabels(ns)
	c.m[ns] = l
	return l
}

func matchesAll(terms []framework.AffinityTerm, pod *v1.Pod, nsLabels labels.Set) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod, nsLabels) {
			return false
		}
	}
	return true
}

// countExisting adds (sign=+1) or removes (sign=-1) one existing pod's contribution.
func (s *interPodAffinityState) countExisting(existing *framework.PodInfo, node *v1.Node, existingNsLabels labels.Set, sign int64) {
	for _, e := range pairCounts(nil).countExisting(s.podInfo, s.nsLabels, existing, node, existingNsLabels) {
		s.countsOf(e.kind)[e.pair] += sign * e.n
	}
}

// Kinds of count, one per map of interPodAffinityState.
const (
	existingAntiAffinityCount = iota
	affinityCount
	antiAffinityCount
)

func (s *interPodAffinityState) countsOf(kind uint8) topologyCounts {
	switch kind {
	case existingAntiAffinityCount:
		return s.existingAntiAffinity
	case affinityCount:
		return s.affinity
	}
	return s.antiAffinity
}

// pairCounts are one node's counts in PreFilter: (kind, domain, count) entries.
type pairCounts []pairCount

type pairCount struct {
	kind uint8
	pair topologyPair
	n    int64
}

func (c pairCounts) add(kind uint8, pair topologyPair) pairCounts {
	for i := range c {
		if c[i].kind == kind && c[i].pair == pair {
			c[i].n++
			return c
		}
	}
	return append(c, pairCount{kind: kind, pair: pair, n: 1})
}

// countExisting is interPodAffinityState.countExisting (sign +1) into c.
func (c pairCounts) countExisting(incoming *framework.PodInfo, incomingNs labels.Set, existing *framework.PodInfo, node *v1.Node, existingNsLabels labels.Set) pairCounts {
	for i := range existing.RequiredAntiAffinityTerms {
		t := &existing.RequiredAntiAffinityTerms[i]
		if t.Matches(incoming.Pod, incomingNs) {
			if v, ok := node.Labels[t.TopologyKey]; ok {
				c = c.add(existingAntiAffinityCount, topologyPair{t.TopologyKey, v})
			}
		}
	}
	if matchesAll(incoming.RequiredAffinityTerms, existing.Pod, existingNsLabels) {
		for i := range incoming.RequiredAffinityTerms {
			t := &incoming.RequiredAffinityTerms[i]
			if v, ok := node.Labels[t.TopologyKey]; ok {
				c = c.add(affinityCount, topologyPair{t.TopologyKey, v})
			}
		}
	}
	for i := range incoming.RequiredAntiAffinityTerms {
		t := &incoming.RequiredAntiAffinityTerms[i]
		if t.Matches(existing.Pod, existingNsLabels) {
			if v, ok := node.Labels[t.TopologyKey]; ok {
				c = c.add(antiAffinityCount, topologyPair{t.TopologyKey, v})
			}
		}
	}
	return c
}

func needsNsLabels(terms []framework.AffinityTerm) bool {
	for i := range terms {
		if terms[i].NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// PreFilter counts, per topology domain, the existing pods relevant to the incoming pod.
func (pl *InterPodAffinity) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	pi := framework.PodInfoFor(state, pod)
	if pi.ParseError != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "invalid pod affinity terms: "+pi.ParseError.Error())
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	s := &interPodAffinityState{podInfo: pi, nsLabels: pl.namespaceLabels(pod.Namespace),
		existingAntiAffinity: topologyCounts{}, affinity: topologyCounts{}, antiAffinity: topologyCounts{}}
	hasOwnTerms := len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms) > 0
	nodes := lister.HavePodsWithRequiredAntiAffinityList()
	if hasOwnTerms {
		nodes = lister.List()
	}
	if len(nodes) == 0 {
		state.Write(interPodAffinityPreFilterKey, s)
		if !hasOwnTerms {
			return nil, framework.NewStatus(framework.Skip)
		}
		return nil, nil
	}
	ownNeedNs := needsNsLabels(pi.RequiredAffinityTerms) || needsNsLabels(pi.RequiredAntiAffinityTerms)
	cache := &nsCache{pl: pl, m: map[string]labels.Set{}}
	// Each node's counts are a few (domain, count) entries, kept in a short slice: three
	// maps per node with pods were most of this PreFilter's allocations.
	partial := make([]pairCounts, len(nodes))
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		pods := ni.PodsWithRequiredAntiAffinity
		if hasOwnTerms {
			pods = ni.Pods
		}
		var local pairCounts
		for _, existing := range pods {
			var nsl labels.Set
			if ownNeedNs {
				nsl = cache.get(existing.Pod.Namespace)
			}
			local = local.countExisting(pi, s.nsLabels, existing, ni.Node(), nsl)
		}
		partial[i] = local
	})
	for _, p := range partial {
		for _, e := range p {
			s.countsOf(e.kind)[e.pair] += e.n
		}
	}
	if !hasOwnTerms && len(s.existingAntiAffinity) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(interPodAffinityPreFilterKey, s)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *InterPodAffinity) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod updates the counts as if podToAdd ran on the node.
func (pl *InterPodAffinity) AddPod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podToAdd *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(interPodAffinityPreFilterKey)
	if !ok {
		return nil
	}
	s := d.(*interPodAffinityState)
	s.countExisting(podToAdd, ni.Node(), pl.namespaceLabels(podToAdd.Pod.Namespace), 1)
	return nil
}

// RemovePod updates the counts as if podToRemove left the node.
func (pl *InterPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podToRemove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(interPodAffinityPreFilterKey)
	if !ok {
		return nil
	}
	s := d.(*interPodAffinityState)
	s.countExisting(podToRemove, ni.Node(), pl.namespaceLabels(podToRemove.Pod.Namespace), -1)
	return nil
}

// Filter implements framework.FilterPlugin.
func (pl *InterPodAffinity) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(interPodAffinityPreFilterKey)
	if !ok {
		return framework.AsStatus(errMissingState(InterPodAffinityName))
	}
	s := d.(*interPodAffinityState)
	node := ni.Node()
	for k, v := range node.Labels {
		if s.existingAntiAffinity[topologyPair{k, v}] > 0 {
			return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
		}
	}
	for i := range s.podInfo.RequiredAntiAffinityTerms {
		t := &s.podInfo.RequiredAntiAffinityTerms[i]
		if v, ok := node.Labels[t.TopologyKey]; ok && s.antiAffinity[topologyPair{t.TopologyKey, v}] > 0 {
			return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
		}
	}
	if terms := s.podInfo.RequiredAffinityTerms; len(terms) > 0 {
		satisfied := true
		for i := range terms {
			v, ok := node.Labels[terms[i].TopologyKey]
			if !ok || s.affinity[topologyPair{terms[i].TopologyKey, v}] <= 0 {
				satisfied = false
				break
			}
		}
		if !satisfied {
			// The first pod of a group that selects itself may go anywhere with the keys.
			if len(s.affinity) == 0 && matchesAll(terms, s.podInfo.Pod, s.nsLabels) {
				for i := range terms {
					if _, ok := node.Labels[terms[i].TopologyKey]; !ok {
						return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
					}
				}
				return nil
			}
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
		}
	}
	return nil
}

type interPodAffinityScoreState struct {
	scores map[string]map[string]int64 // topology key -> value -> score
}

func (s *interPodAffinityScoreState) Clone() framework.StateData { return s }

const interPodAffinityPreScoreKey framework.StateKey = "PreScore" + InterPodAffinityName

// PreScore sums preferred-term weights per topology domain from both sides: the incoming
// pod's preferences for existing pods, and existing pods' terms about the incoming pod.
func (pl *InterPodAffinity) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	pi := framework.PodInfoFor(state, pod)
	if pi.ParseError != nil {
		return framework.AsStatus(pi.ParseError)
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	hasOwn := len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
	nodes := lister.HavePodsWithAffinityList()
	if hasOwn {
		nodes = lister.List()
	}
	if len(nodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	nsLabels := pl.namespaceLabels(pod.Namespace)
	cache := &nsCache{pl: pl, m: map[string]labels.Set{}}
	partial := make([]map[topologyPair]int64, len(nodes))
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := ni.Node()
		// Allocated at the first match: most nodes' pods have no term about this pod,
		// and a map per node with pods was most of PreScore's cost.
		var local map[topologyPair]int64
		add := func(key string, w int64) {
			if v, ok := node.Labels[key]; ok {
				if local == nil {
					local = map[topologyPair]int64{}
				}
				local[topologyPair{key, v}] += w
			}
		}
		pods := ni.PodsWithAffinity
		if hasOwn {
			pods = ni.Pods
		}
		for _, existing := range pods {
			var existingNs labels.Set
			if hasOwn {
				existingNs = cache.get(existing.Pod.Namespace)
			}
			for j := range pi.PreferredAffinityTerms {
				t := &pi.PreferredAffinityTerms[j]
				if t.Matches(existing.Pod, existingNs) {
					add(t.TopologyKey, int64(t.Weight))
				}
			}
			for j := range pi.PreferredAntiAffinityTerms {
				t := &pi.PreferredAntiAffinityTerms[j]
				if t.Matches(existing.Pod, existingNs) {
					add(t.TopologyKey, -int64(t.Weight))
				}
			}
			if pl.hardWeight > 0 {
				for j := range existing.RequiredAffinityTerms {
					t := &existing.RequiredAffinityTerms[j]
					if t.Matches(pod, nsLabels) {
						add(t.TopologyKey, pl.hardWeight)
					}
				}
			}
			if !pl.ignorePreferred {
				for j := range existing.PreferredAffinityTerms {
					t := &existing.PreferredAffinityTerms[j]
					if t.Matches(pod, nsLabels) {
						add(t.TopologyKey, int64(t.Weight))
					}
				}
				for j := range existing.PreferredAntiAffinityTerms {
					t := &existing.PreferredAntiAffinityTerms[j]
					if t.Matches(pod, nsLabels) {
						add(t.TopologyKey, -int64(t.Weight))
					}
				}
			}
		}
		partial[i] = local
	})
	s := &interPodAffinityScoreState{scores: map[string]map[string]int64{}}
	for _, p := range partial {
		for pair, w := range p {
			if s.scores[pair.key] == nil {
				s.scores[pair.key] = map[string]int64{}
			}
			s.scores[pair.key][pair.value] += w
		}
	}
	if len(s.scores) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(interPodAffinityPreScoreKey, s)
	return nil
}

// Score sums the domain scores of the node's topology labels.
func (pl *InterPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(interPodAffinityPreScoreKey)
	if !ok {
		return 0, nil
	}
	s := d.(*interPodAffinityScoreState)
	var score int64
	for key, values := range s.scores {
		if v, ok := ni.Node().Labels[key]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *InterPodAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps [min, max] to [0, 100].
func (pl *InterPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores []framework.NodeScore) *framework.Status {
	if _, ok := state.Read(interPodAffinityPreScoreKey); !ok {
		return nil
	}
	minScore, maxScore := int64(1<<62), int64(-1<<62)
	for _, s := range scores {
		minScore = min(minScore, s.Score)
		maxScore = max(maxScore, s.Score)
	}
	for i := range scores {
		if maxScore == minScore {
			scores[i].Score = 0
			continue
		}
		scores[i].Score = framework.MaxNodeScore * (scores[i].Score - minScore) / (maxScore - minScore)
	}
	return nil
}

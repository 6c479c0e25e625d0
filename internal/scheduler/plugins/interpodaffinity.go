package plugins

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"mizzen/internal/scheduler/affinityindex"
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
type topologyPair = affinityindex.Pair

// domainCounts is a number of pods per topology domain: counts of the snapshot's
// affinity index it shares, read only, plus its own, counted by a walk over the
// snapshot's pods or changed by AddPod and RemovePod (preemption's dry run).
type domainCounts struct {
	shared []*affinityindex.Counts
	own    map[topologyPair]int64
	// total is the sum over all domains, shared and own.
	total int64
}

func (c *domainCounts) get(p topologyPair) int64 {
	n := c.own[p]
	for _, s := range c.shared {
		n += s.M[p]
	}
	return n
}

func (c *domainCounts) add(p topologyPair, n int64) {
	if c.own == nil {
		c.own = map[topologyPair]int64{}
	}
	if v := c.own[p] + n; v == 0 {
		delete(c.own, p)
	} else {
		c.own[p] = v
	}
	c.total += n
}

func (c *domainCounts) share(counts []*affinityindex.Counts) {
	for _, s := range counts {
		if s.Total != 0 {
			c.shared = append(c.shared, s)
			c.total += s.Total
		}
	}
}

// clone copies the own counts; the shared ones are never written.
func (c *domainCounts) clone() domainCounts {
	out := domainCounts{shared: c.shared, total: c.total}
	if c.own != nil {
		out.own = make(map[topologyPair]int64, len(c.own))
		for k, v := range c.own {
			out.own[k] = v
		}
	}
	return out
}

type interPodAffinityState struct {
	podInfo  *framework.PodInfo
	nsLabels labels.Set
	// existingAntiAffinity counts, per domain, existing pods whose required anti-affinity
	// matches the incoming pod; existingKeys are the topology keys of its domains.
	existingAntiAffinity domainCounts
	existingKeys         []string
	// affinity counts, per domain, existing pods matching all the pod's affinity terms.
	affinity domainCounts
	// antiAffinity counts, per domain, existing pods matching the pod's anti-affinity terms.
	antiAffinity domainCounts
}

func (s *interPodAffinityState) Clone() framework.StateData {
	return &interPodAffinityState{
		podInfo: s.podInfo, nsLabels: s.nsLabels,
		existingAntiAffinity: s.existingAntiAffinity.clone(),
		existingKeys:         s.existingKeys,
		affinity:             s.affinity.clone(),
		antiAffinity:         s.antiAffinity.clone(),
	}
}

func (s *interPodAffinityState) addExistingKey(key string) {
	if !slices.Contains(s.existingKeys, key) {
		// A new slice: clones share the old one.
		s.existingKeys = append(slices.Clip(s.existingKeys), key)
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

// affinityIndex returns the snapshot's counts, nil when the snapshot keeps none.
func (pl *InterPodAffinity) affinityIndex() *affinityindex.Index {
	if x, ok := pl.handle.SnapshotSharedLister().NodeInfos().(interface {
		AffinityIndex() *affinityindex.Index
	}); ok {
		return x.AffinityIndex()
	}
	return nil
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
	for _, e := range pairCounts(nil).countExisting(s.podInfo, s.nsLabels, existing, node, existingNsLabels, true, true) {
		s.addCount(e.kind, e.pair, sign*e.n)
	}
}

func (s *interPodAffinityState) addCount(kind uint8, pair topologyPair, n int64) {
	switch kind {
	case existingAntiAffinityCount:
		s.existingAntiAffinity.add(pair, n)
		s.addExistingKey(pair.Key)
	case affinityCount:
		s.affinity.add(pair, n)
	default:
		s.antiAffinity.add(pair, n)
	}
}

// Kinds of count, one per domainCounts of interPodAffinityState.
const (
	existingAntiAffinityCount = iota
	affinityCount
	antiAffinityCount
)

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

// countExisting is interPodAffinityState.countExisting (sign +1) into c: the existing
// pod's anti-affinity against the incoming pod when existingSide, the incoming pod's
// terms against the existing pod when ownSide.
func (c pairCounts) countExisting(incoming *framework.PodInfo, incomingNs labels.Set, existing *framework.PodInfo, node *v1.Node, existingNsLabels labels.Set, existingSide, ownSide bool) pairCounts {
	if existingSide {
		for i := range existing.RequiredAntiAffinityTerms {
			t := &existing.RequiredAntiAffinityTerms[i]
			if t.Matches(incoming.Pod, incomingNs) {
				if v, ok := node.Labels[t.TopologyKey]; ok {
					c = c.add(existingAntiAffinityCount, topologyPair{Key: t.TopologyKey, Value: v})
				}
			}
		}
	}
	if !ownSide {
		return c
	}
	if matchesAll(incoming.RequiredAffinityTerms, existing.Pod, existingNsLabels) {
		for i := range incoming.RequiredAffinityTerms {
			t := &incoming.RequiredAffinityTerms[i]
			if v, ok := node.Labels[t.TopologyKey]; ok {
				c = c.add(affinityCount, topologyPair{Key: t.TopologyKey, Value: v})
			}
		}
	}
	for i := range incoming.RequiredAntiAffinityTerms {
		t := &incoming.RequiredAntiAffinityTerms[i]
		if t.Matches(existing.Pod, existingNsLabels) {
			if v, ok := node.Labels[t.TopologyKey]; ok {
				c = c.add(antiAffinityCount, topologyPair{Key: t.TopologyKey, Value: v})
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

// indexedOwnCounts takes the incoming pod's counts from the snapshot's index; it
// reports false, leaving s unchanged, when some term group is not indexed.
func (s *interPodAffinityState) indexedOwnCounts(x *affinityindex.Index, nsLabels func(string) labels.Set) bool {
	var affinity, anti []*affinityindex.Counts
	if terms := s.podInfo.RequiredAffinityTerms; len(terms) > 0 {
		counts, ok := x.Matching(terms, nsLabels)
		if !ok {
			return false
		}
		affinity = counts
	}
	for i := range s.podInfo.RequiredAntiAffinityTerms {
		counts, ok := x.Matching(s.podInfo.RequiredAntiAffinityTerms[i:i+1], nsLabels)
		if !ok {
			return false
		}
		anti = append(anti, counts...)
	}
	s.affinity.share(affinity)
	s.antiAffinity.share(anti)
	return true
}

// PreFilter counts, per topology domain, the existing pods relevant to the incoming pod.
// The counts come from the snapshot's affinity index where it keeps them (the pod's
// term groups are carried by pods already placed); otherwise they are counted by a
// walk over every existing pod, as upstream does.
func (pl *InterPodAffinity) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	pi := framework.PodInfoFor(state, pod)
	if pi.ParseError != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "invalid pod affinity terms: "+pi.ParseError.Error())
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	s := &interPodAffinityState{podInfo: pi, nsLabels: pl.namespaceLabels(pod.Namespace)}
	hasOwnTerms := len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms) > 0
	cache := &nsCache{pl: pl, m: map[string]labels.Set{}}
	walkExisting, walkOwn := true, hasOwnTerms
	if x := pl.affinityIndex(); x != nil {
		for _, c := range x.Carriers(pod, s.nsLabels, affinityindex.RequiredAntiAffinity) {
			s.existingAntiAffinity.share([]*affinityindex.Counts{&c.Counts})
			s.addExistingKey(c.Term.TopologyKey)
		}
		walkExisting = false
		if hasOwnTerms && s.indexedOwnCounts(x, cache.get) {
			walkOwn = false
		}
	}
	var nodes []*framework.NodeInfo
	switch {
	case walkOwn:
		nodes = lister.List()
	case walkExisting:
		nodes = lister.HavePodsWithRequiredAntiAffinityList()
	}
	if len(nodes) > 0 {
		pl.walk(ctx, s, nodes, cache, walkExisting, walkOwn)
	}
	if !hasOwnTerms && s.existingAntiAffinity.total == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(interPodAffinityPreFilterKey, s)
	return nil, nil
}

// walk counts into s the pods of nodes: those with required anti-affinity against the
// incoming pod when existingSide, those matching its terms when ownSide.
func (pl *InterPodAffinity) walk(ctx context.Context, s *interPodAffinityState, nodes []*framework.NodeInfo, cache *nsCache, existingSide, ownSide bool) {
	pi := s.podInfo
	ownNeedNs := ownSide && (needsNsLabels(pi.RequiredAffinityTerms) || needsNsLabels(pi.RequiredAntiAffinityTerms))
	// Each node's counts are a few (domain, count) entries, kept in a short slice: three
	// maps per node with pods were most of this PreFilter's allocations.
	partial := make([]pairCounts, len(nodes))
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		pods := ni.PodsWithRequiredAntiAffinity
		if ownSide {
			pods = ni.Pods
		}
		var local pairCounts
		for _, existing := range pods {
			var nsl labels.Set
			if ownNeedNs {
				nsl = cache.get(existing.Pod.Namespace)
			}
			local = local.countExisting(pi, s.nsLabels, existing, ni.Node(), nsl, existingSide, ownSide)
		}
		partial[i] = local
	})
	for _, p := range partial {
		for _, e := range p {
			s.addCount(e.kind, e.pair, e.n)
		}
	}
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
	// Upstream's order: a node failing the pod's affinity is UnschedulableAndUnresolvable
	// (preemption cannot help there) even where anti-affinity fails too.
	if terms := s.podInfo.RequiredAffinityTerms; len(terms) > 0 {
		satisfied := true
		for i := range terms {
			v, ok := ni.Label(terms[i].TopologyKey)
			if !ok || s.affinity.get(topologyPair{Key: terms[i].TopologyKey, Value: v}) <= 0 {
				satisfied = false
				break
			}
		}
		if !satisfied && !firstOfItsGroup(s, ni) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
		}
	}
	if s.antiAffinity.total != 0 {
		for i := range s.podInfo.RequiredAntiAffinityTerms {
			t := &s.podInfo.RequiredAntiAffinityTerms[i]
			if v, ok := ni.Label(t.TopologyKey); ok && s.antiAffinity.get(topologyPair{Key: t.TopologyKey, Value: v}) > 0 {
				return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
			}
		}
	}
	// Upstream looks up every label of the node; only these keys can have counts.
	for _, k := range s.existingKeys {
		if v, ok := ni.Label(k); ok && s.existingAntiAffinity.get(topologyPair{Key: k, Value: v}) > 0 {
			return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
		}
	}
	return nil
}

// firstOfItsGroup says whether the pod, whose required affinity no pod satisfies yet,
// may go to the node anyway: no pod matches any of its terms and it matches all of them
// itself (the first of a group that selects itself), and the node has every term's key.
func firstOfItsGroup(s *interPodAffinityState, ni *framework.NodeInfo) bool {
	terms := s.podInfo.RequiredAffinityTerms
	if s.affinity.total != 0 || !matchesAll(terms, s.podInfo.Pod, s.nsLabels) {
		return false
	}
	for i := range terms {
		if _, ok := ni.Label(terms[i].TopologyKey); !ok {
			return false
		}
	}
	return true
}

// weightedCounts are shared counts of the snapshot's affinity index, each pod in a
// domain of key worth weight.
type weightedCounts struct {
	key    string
	weight int64
	counts *affinityindex.Counts
}

type interPodAffinityScoreState struct {
	scores map[string]map[string]int64 // counted by a walk: topology key -> value -> score
	shared []weightedCounts
}

func (s *interPodAffinityScoreState) Clone() framework.StateData { return s }

const interPodAffinityPreScoreKey framework.StateKey = "PreScore" + InterPodAffinityName

// indexedOwnScores appends the pod's preferred terms' counts from the index to s; it
// reports false, leaving s unchanged, when some term is not indexed.
func (s *interPodAffinityScoreState) indexedOwnScores(x *affinityindex.Index, pi *framework.PodInfo, nsLabels func(string) labels.Set) bool {
	var out []weightedCounts
	for _, group := range []struct {
		terms []framework.WeightedAffinityTerm
		sign  int64
	}{{pi.PreferredAffinityTerms, 1}, {pi.PreferredAntiAffinityTerms, -1}} {
		for i := range group.terms {
			t := &group.terms[i]
			counts, ok := x.Matching([]framework.AffinityTerm{t.AffinityTerm}, nsLabels)
			if !ok {
				return false
			}
			for _, c := range counts {
				out = append(out, weightedCounts{key: t.TopologyKey, weight: group.sign * int64(t.Weight), counts: c})
			}
		}
	}
	s.shared = append(s.shared, out...)
	return true
}

// PreScore sums preferred-term weights per topology domain from both sides: the incoming
// pod's preferences for existing pods, and existing pods' terms about the incoming pod.
// As in PreFilter, the counts come from the snapshot's affinity index where it keeps
// them, else from a walk over the existing pods.
func (pl *InterPodAffinity) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	pi := framework.PodInfoFor(state, pod)
	if pi.ParseError != nil {
		return framework.AsStatus(pi.ParseError)
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	hasOwn := len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
	nsLabels := pl.namespaceLabels(pod.Namespace)
	cache := &nsCache{pl: pl, m: map[string]labels.Set{}}
	s := &interPodAffinityScoreState{scores: map[string]map[string]int64{}}
	walkExisting, walkOwn := true, hasOwn
	if x := pl.affinityIndex(); x != nil {
		var kinds []uint8
		if pl.hardWeight > 0 {
			kinds = append(kinds, affinityindex.RequiredAffinity)
		}
		if !pl.ignorePreferred {
			kinds = append(kinds, affinityindex.PreferredAffinity, affinityindex.PreferredAntiAffinity)
		}
		if len(kinds) > 0 {
			for _, c := range x.Carriers(pod, nsLabels, kinds...) {
				w := int64(c.Weight)
				switch c.Kind {
				case affinityindex.RequiredAffinity:
					w = pl.hardWeight
				case affinityindex.PreferredAntiAffinity:
					w = -w
				}
				s.shared = append(s.shared, weightedCounts{key: c.Term.TopologyKey, weight: w, counts: &c.Counts})
			}
		}
		walkExisting = false
		if hasOwn && s.indexedOwnScores(x, pi, cache.get) {
			walkOwn = false
		}
	}
	var nodes []*framework.NodeInfo
	switch {
	case walkOwn:
		nodes = lister.List()
	case walkExisting:
		nodes = lister.HavePodsWithAffinityList()
	}
	if len(nodes) > 0 {
		pl.walkScores(ctx, s, pi, nsLabels, nodes, cache, walkExisting, walkOwn)
	}
	if len(s.scores) == 0 && len(s.shared) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(interPodAffinityPreScoreKey, s)
	return nil
}

// walkScores adds into s the weights of the pods of nodes: the existing pods' terms
// about the incoming pod when existingSide, the incoming pod's preferred terms when
// ownSide.
func (pl *InterPodAffinity) walkScores(ctx context.Context, s *interPodAffinityScoreState, pi *framework.PodInfo, nsLabels labels.Set, nodes []*framework.NodeInfo, cache *nsCache, existingSide, ownSide bool) {
	pod := pi.Pod
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
				local[topologyPair{Key: key, Value: v}] += w
			}
		}
		pods := ni.PodsWithAffinity
		if ownSide {
			pods = ni.Pods
		}
		for _, existing := range pods {
			if ownSide {
				existingNs := cache.get(existing.Pod.Namespace)
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
			}
			if !existingSide {
				continue
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
	for _, p := range partial {
		for pair, w := range p {
			if s.scores[pair.Key] == nil {
				s.scores[pair.Key] = map[string]int64{}
			}
			s.scores[pair.Key][pair.Value] += w
		}
	}
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
		if v, ok := ni.Label(key); ok {
			score += values[v]
		}
	}
	for _, w := range s.shared {
		if v, ok := ni.Label(w.key); ok {
			score += w.weight * w.counts.M[topologyPair{Key: w.key, Value: v}]
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

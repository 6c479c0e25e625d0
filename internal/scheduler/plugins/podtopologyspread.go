package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"mizzen/internal/scheduler/framework"
	"mizzen/internal/scheduler/spreadindex"
)

// Reasons shown by PodTopologySpread, as upstream.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// Defaulting types of PodTopologySpreadArgs.
const (
	SystemDefaulting = "System"
	ListDefaulting   = "List"
)

// PodTopologySpreadArgs is the plugin's configuration.
type PodTopologySpreadArgs struct {
	DefaultConstraints []v1.TopologySpreadConstraint `json:"defaultConstraints,omitempty"`
	DefaultingType     string                        `json:"defaultingType,omitempty"`
}

// systemDefaultConstraints are upstream's built-in soft defaults.
var systemDefaultConstraints = []v1.TopologySpreadConstraint{
	{TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 5},
}

// PodTopologySpread spreads pods matching a selector across topology domains: hard
// constraints (DoNotSchedule) filter, soft ones (ScheduleAnyway) score. Pods without
// constraints get the default ones, selecting the pods of their services and workloads.
type PodTopologySpread struct {
	handle   framework.Handle
	defaults []v1.TopologySpreadConstraint
	// systemDefaulted: defaults are the system's (DefaultingType System).
	systemDefaulted bool
	services        corelisters.ServiceLister
	rcs             corelisters.ReplicationControllerLister
	replicaSets     appslisters.ReplicaSetLister
	statefulSet     appslisters.StatefulSetLister
}

var (
	_ framework.PreFilterPlugin   = (*PodTopologySpread)(nil)
	_ framework.FilterPlugin      = (*PodTopologySpread)(nil)
	_ framework.PreScorePlugin    = (*PodTopologySpread)(nil)
	_ framework.ScorePlugin       = (*PodTopologySpread)(nil)
	_ framework.EnqueueExtensions = (*PodTopologySpread)(nil)
)

// NewPodTopologySpread is the plugin factory.
func NewPodTopologySpread(raw json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	args := PodTopologySpreadArgs{DefaultingType: SystemDefaulting}
	if err := decodeArgs(raw, PodTopologySpreadName, &args); err != nil {
		return nil, err
	}
	pl := &PodTopologySpread{handle: h}
	switch args.DefaultingType {
	case SystemDefaulting:
		if len(args.DefaultConstraints) > 0 {
			return nil, fmt.Errorf("PodTopologySpreadArgs: defaultConstraints: Invalid value: when .defaultingType is \"System\", .defaultConstraints must be empty")
		}
		pl.defaults, pl.systemDefaulted = systemDefaultConstraints, true
	case ListDefaulting:
		for i, c := range args.DefaultConstraints {
			if c.LabelSelector != nil {
				return nil, fmt.Errorf("PodTopologySpreadArgs: defaultConstraints[%d].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod", i)
			}
		}
		pl.defaults = args.DefaultConstraints
	default:
		return nil, fmt.Errorf("PodTopologySpreadArgs: defaultingType: Unsupported value: %q", args.DefaultingType)
	}
	if len(pl.defaults) > 0 && h != nil && h.SharedInformerFactory() != nil {
		f := h.SharedInformerFactory()
		pl.services = f.Core().V1().Services().Lister()
		pl.rcs = f.Core().V1().ReplicationControllers().Lister()
		pl.replicaSets = f.Apps().V1().ReplicaSets().Lister()
		pl.statefulSet = f.Apps().V1().StatefulSets().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*PodTopologySpread) Name() string { return PodTopologySpreadName }

// EventsToRegister: matching pods come, go or are relabelled; nodes appear, are
// relabelled or retainted (they may enter or leave the counted domains).
func (*PodTopologySpread) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add | framework.Delete | framework.UpdatePodLabel}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.Delete | framework.UpdateNodeLabel | framework.UpdateNodeTaint}},
	}
}

// spreadConstraint is a parsed constraint.
type spreadConstraint struct {
	maxSkew           int32
	topologyKey       string
	selector          labels.Selector
	minDomains        int32
	honorNodeAffinity bool
	honorNodeTaints   bool
}

func (pl *PodTopologySpread) constraintsFor(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != action {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				return nil, err
			}
			for _, key := range c.MatchLabelKeys {
				if v, ok := pod.Labels[key]; ok {
					if r, err := labels.NewRequirement(key, "=", []string{v}); err == nil {
						sel = sel.Add(*r)
					}
				}
			}
			out = append(out, newSpreadConstraint(c, sel))
		}
		return out, nil
	}
	var defaults []v1.TopologySpreadConstraint
	for _, c := range pl.defaults {
		if c.WhenUnsatisfiable == action {
			defaults = append(defaults, c)
		}
	}
	if len(defaults) == 0 {
		return nil, nil
	}
	sel := pl.defaultSelector(pod)
	if sel.Empty() {
		return nil, nil
	}
	for _, c := range defaults {
		out = append(out, newSpreadConstraint(c, sel))
	}
	return out, nil
}

func newSpreadConstraint(c v1.TopologySpreadConstraint, sel labels.Selector) spreadConstraint {
	sc := spreadConstraint{maxSkew: c.MaxSkew, topologyKey: c.TopologyKey, selector: sel, minDomains: 1,
		honorNodeAffinity: true, honorNodeTaints: false}
	if c.MinDomains != nil {
		sc.minDomains = *c.MinDomains
	}
	if c.NodeAffinityPolicy != nil && *c.NodeAffinityPolicy == v1.NodeInclusionPolicyIgnore {
		sc.honorNodeAffinity = false
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
		sc.honorNodeTaints = true
	}
	return sc
}

// defaultSelector merges the selectors of services, replication controllers, replica
// sets and stateful sets that select the pod, as upstream's DefaultSelector.
func (pl *PodTopologySpread) defaultSelector(pod *v1.Pod) labels.Selector {
	set := labels.Set{}
	if pl.services != nil {
		if svcs, err := pl.services.Services(pod.Namespace).List(labels.Everything()); err == nil {
			for _, s := range svcs {
				if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
					for k, v := range s.Spec.Selector {
						set[k] = v
					}
				}
			}
		}
	}
	if pl.rcs != nil {
		if rcs, err := pl.rcs.ReplicationControllers(pod.Namespace).List(labels.Everything()); err == nil {
			for _, rc := range rcs {
				if len(rc.Spec.Selector) > 0 && labels.SelectorFromSet(rc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
					for k, v := range rc.Spec.Selector {
						set[k] = v
					}
				}
			}
		}
	}
	selector := labels.NewSelector()
	if len(set) > 0 {
		selector = labels.SelectorFromSet(set)
	}
	addOwner := func(ls *metav1.LabelSelector) {
		if ls == nil {
			return
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			return
		}
		reqs, _ := sel.Requirements()
		selector = selector.Add(reqs...)
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		switch ref.Kind {
		case "ReplicaSet":
			if pl.replicaSets != nil {
				if rs, err := pl.replicaSets.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
					addOwner(rs.Spec.Selector)
				}
			}
		case "StatefulSet":
			if pl.statefulSet != nil {
				if ss, err := pl.statefulSet.StatefulSets(pod.Namespace).Get(ref.Name); err == nil {
					addOwner(ss.Spec.Selector)
				}
			}
		}
	}
	return selector
}

// nodeCounted reports whether a node takes part in the constraint's skew computation.
func nodeCounted(c *spreadConstraint, required nodeaffinity.RequiredNodeAffinity, tolerations []v1.Toleration, node *v1.Node) bool {
	if c.honorNodeAffinity {
		if ok, _ := required.Match(node); !ok {
			return false
		}
	}
	if c.honorNodeTaints {
		if _, untolerated := findUntoleratedTaint(node.Spec.Taints, tolerations, hardTaint); untolerated {
			return false
		}
	}
	return true
}

func hasAllKeys(nodeLabels map[string]string, cs []spreadConstraint) bool {
	for i := range cs {
		if _, ok := nodeLabels[cs[i].topologyKey]; !ok {
			return false
		}
	}
	return true
}

func countMatching(pods []*framework.PodInfo, sel labels.Selector, ns string) int64 {
	var n int64
	for _, p := range pods {
		if p.Pod.Namespace != ns || p.Pod.DeletionTimestamp != nil {
			continue
		}
		if sel.Matches(labels.Set(p.Pod.Labels)) {
			n++
		}
	}
	return n
}

type spreadFilterState struct {
	constraints []spreadConstraint
	// counts[i] maps a domain value of constraint i to its matching pods.
	counts []map[string]int64
	// shared[i]: counts[i] is the snapshot's spread index's, copied before a change.
	shared []bool
	// mins[i] is minMatch(i), kept as counts change: Filter reads it for every node.
	mins []int64
	// selfMatch[i] is 1 when the incoming pod matches constraint i's selector.
	selfMatch   []int64
	required    nodeaffinity.RequiredNodeAffinity
	tolerations []v1.Toleration
}

func (s *spreadFilterState) Clone() framework.StateData {
	out := &spreadFilterState{constraints: s.constraints, selfMatch: s.selfMatch, required: s.required, tolerations: s.tolerations,
		counts: make([]map[string]int64, len(s.counts)), shared: make([]bool, len(s.counts)), mins: slices.Clone(s.mins)}
	for i, m := range s.counts {
		c := make(map[string]int64, len(m))
		for k, v := range m {
			c[k] = v
		}
		out.counts[i] = c
	}
	return out
}

// minMatch is the smallest count over eligible domains, or 0 when there are fewer
// domains than minDomains. It walks every domain: Filter reads mins instead.
func (s *spreadFilterState) minMatch(i int) int64 {
	m := s.counts[i]
	if int32(len(m)) < s.constraints[i].minDomains {
		return 0
	}
	minV := int64(math.MaxInt64)
	for _, v := range m {
		minV = min(minV, v)
	}
	if minV == math.MaxInt64 {
		return 0
	}
	return minV
}

const spreadPreFilterKey framework.StateKey = "PreFilter" + PodTopologySpreadName

// PreFilter counts matching pods per domain for the pod's hard constraints.
func (pl *PodTopologySpread) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	cs, err := pl.constraintsFor(pod, v1.DoNotSchedule)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	s := &spreadFilterState{constraints: cs, counts: make([]map[string]int64, len(cs)), selfMatch: make([]int64, len(cs)),
		shared: make([]bool, len(cs)), mins: make([]int64, len(cs)),
		required: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations}
	for i := range cs {
		if cs[i].selector.Matches(labels.Set(pod.Labels)) {
			s.selfMatch[i] = 1
		}
	}
	nodes := pl.handle.SnapshotSharedLister().NodeInfos().List()
	kept, count := pl.indexedCounts(pod, cs, nodes, false)
	walk := make([]bool, len(cs))
	for i := range cs {
		if kept[i] != nil {
			s.counts[i], s.shared[i] = kept[i], true
		} else {
			walk[i] = true
		}
	}
	if slices.Contains(walk, true) {
		pl.walkFilterCounts(ctx, s, walk, nodes, count)
	}
	for i := range cs {
		s.mins[i] = s.minMatch(i)
	}
	state.Write(spreadPreFilterKey, s)
	return nil, nil
}

// walkFilterCounts counts, for the constraints i with walk[i], the matching pods per
// domain over every node that counts, count giving a node's matching pods.
func (pl *PodTopologySpread) walkFilterCounts(ctx context.Context, s *spreadFilterState, walk []bool, nodes []*framework.NodeInfo, count func(int, *framework.NodeInfo) int64) {
	cs := s.constraints
	for i := range cs {
		if walk[i] {
			s.counts[i] = map[string]int64{}
		}
	}
	// One flat slice (node n's counts at n*len(cs)), -1 for a node or constraint that
	// does not count: a slice per node was thousands of allocations per pod.
	// The domain values are read in the parallel part too, so the sequential merge
	// touches only these two slices, not thousands of nodes' labels.
	perNode := make([]int64, len(nodes)*len(cs))
	domains := make([]string, len(nodes)*len(cs))
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(n int) {
		counts := perNode[n*len(cs) : (n+1)*len(cs)]
		ni := nodes[n]
		if !hasAllKeys(ni.Labels(), cs) {
			for i := range counts {
				counts[i] = -1
			}
			return
		}
		for i := range cs {
			if !walk[i] || !nodeCounted(&cs[i], s.required, s.tolerations, ni.Node()) {
				counts[i] = -1
				continue
			}
			counts[i] = count(i, ni)
			domains[n*len(cs)+i] = ni.Labels()[cs[i].topologyKey]
		}
	})
	for j, count := range perNode {
		if count >= 0 {
			s.counts[j%len(cs)][domains[j]] += count
		}
	}
}

// indexedCounts reads the snapshot's spread index for the pod's constraints over
// nodes, when the snapshot keeps one. kept[i] are constraint i's counts per domain when
// every node with the keys counts for it, nil where a walk over the nodes must decide
// which count; count gives a node's matching pods for constraint i, from the index or,
// without it, by matching the node's pods. The domains are those of the nodes carrying
// every constraint's key or, with ownKeyOnly, constraint i's own key.
func (pl *PodTopologySpread) indexedCounts(pod *v1.Pod, cs []spreadConstraint, nodes []*framework.NodeInfo, ownKeyOnly bool) (kept []map[string]int64, count func(int, *framework.NodeInfo) int64) {
	kept = make([]map[string]int64, len(cs))
	x := pl.spreadIndex()
	if x == nil {
		return kept, func(i int, ni *framework.NodeInfo) int64 {
			return countMatching(ni.Pods, cs[i].selector, pod.Namespace)
		}
	}
	keys := constraintKeys(cs)
	entries := make([]*spreadindex.Entry, len(cs))
	for i := range cs {
		if ownKeyOnly {
			keys = []string{cs[i].topologyKey}
		}
		entries[i] = x.Lookup(pod.Namespace, cs[i].selector, cs[i].topologyKey, keys, nodes)
		if everyNodeCounts(&cs[i], pod, x) {
			kept[i] = entries[i].Domains()
		}
	}
	return kept, func(i int, ni *framework.NodeInfo) int64 { return entries[i].OnNode(ni.Name()) }
}

// spreadIndex returns the snapshot's counts, nil when the snapshot keeps none.
func (pl *PodTopologySpread) spreadIndex() *spreadindex.Index {
	if x, ok := pl.handle.SnapshotSharedLister().NodeInfos().(interface {
		SpreadIndex() *spreadindex.Index
	}); ok {
		return x.SpreadIndex()
	}
	return nil
}

// constraintKeys is the key set of constraints: a node lacking any key takes no part.
func constraintKeys(cs []spreadConstraint) []string {
	keys := make([]string, len(cs))
	for i := range cs {
		keys[i] = cs[i].topologyKey
	}
	return spreadindex.KeySet(keys)
}

// everyNodeCounts reports whether nodeCounted holds for every node: the pod's node
// affinity is not honoured or has no required part, and taints are not honoured or no
// node has a NoSchedule or NoExecute taint.
func everyNodeCounts(c *spreadConstraint, pod *v1.Pod, x *spreadindex.Index) bool {
	if c.honorNodeAffinity && (len(pod.Spec.NodeSelector) > 0 || pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil &&
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil) {
		return false
	}
	return !c.honorNodeTaints || x.TaintedNodes() == 0
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *PodTopologySpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

func (pl *PodTopologySpread) update(state *framework.CycleState, pod *v1.Pod, changed *framework.PodInfo, ni *framework.NodeInfo, delta int64) *framework.Status {
	d, ok := state.Read(spreadPreFilterKey)
	if !ok {
		return nil
	}
	s := d.(*spreadFilterState)
	node := ni.Node()
	if changed.Pod.Namespace != pod.Namespace || !hasAllKeys(node.Labels, s.constraints) {
		return nil
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		if !nodeCounted(c, s.required, s.tolerations, node) || !c.selector.Matches(labels.Set(changed.Pod.Labels)) {
			continue
		}
		if s.shared[i] {
			s.counts[i], s.shared[i] = maps.Clone(s.counts[i]), false
		}
		s.counts[i][node.Labels[c.topologyKey]] += delta
		s.mins[i] = s.minMatch(i)
	}
	return nil
}

// AddPod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) AddPod(_ context.Context, state *framework.CycleState, pod *v1.Pod, podToAdd *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, podToAdd, ni, 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, pod *v1.Pod, podToRemove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, podToRemove, ni, -1)
}

// Filter rejects nodes where placing the pod would exceed maxSkew.
func (pl *PodTopologySpread) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(spreadPreFilterKey)
	if !ok {
		return framework.AsStatus(errMissingState(PodTopologySpreadName))
	}
	s := d.(*spreadFilterState)
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := ni.Label(c.topologyKey)
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		skew := s.counts[i][value] + s.selfMatch[i] - s.mins[i]
		if skew > int64(c.maxSkew) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}

type spreadScoreState struct {
	constraints []spreadConstraint
	counts      []map[string]int64
	weights     []float64
	// ignored nodes lack a topology key; they score 0.
	ignored map[string]bool
}

func (s *spreadScoreState) Clone() framework.StateData { return s }

const spreadPreScoreKey framework.StateKey = "PreScore" + PodTopologySpreadName

// PreScore counts matching pods per domain for the soft constraints.
func (pl *PodTopologySpread) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered []*framework.NodeInfo) *framework.Status {
	cs, err := pl.constraintsFor(pod, v1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &spreadScoreState{constraints: cs, counts: make([]map[string]int64, len(cs)), weights: make([]float64, len(cs)), ignored: map[string]bool{}}
	for i := range cs {
		s.counts[i] = map[string]int64{}
	}
	// As upstream, a node must have every topology key only for the pod's own
	// constraints: under the system defaults a node without a zone label is scored by
	// its hostname (its zone counts as the domain "", which Score leaves out).
	requireAll := len(pod.Spec.TopologySpreadConstraints) > 0 || !pl.systemDefaulted
	// Domains are those of the feasible nodes; counts cover all nodes in them.
	domains := make([]map[string]bool, len(cs))
	for i := range cs {
		domains[i] = map[string]bool{}
	}
	// emptyValue[i]: a feasible node has constraint i's key with the value "", a domain
	// that, when not all keys are required, also holds the nodes lacking the key.
	emptyValue := make([]bool, len(cs))
	for _, ni := range filtered {
		node := ni.Node()
		if requireAll && !hasAllKeys(node.Labels, cs) {
			s.ignored[node.Name] = true
			continue
		}
		for i := range cs {
			v, ok := node.Labels[cs[i].topologyKey]
			domains[i][v] = true
			emptyValue[i] = emptyValue[i] || ok && v == ""
		}
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	all := pl.handle.SnapshotSharedLister().NodeInfos().List()
	// Score reads the counts of the feasible nodes' domains only, which the kept counts
	// hold (read only, for this cycle). When not all keys are required, a node lacking
	// constraint i's key counts in domain "" for it, which Score reads for no node
	// lacking the key: the index's domains over the nodes with that one key serve, but
	// for a domain "" some node has.
	kept, count := pl.indexedCounts(pod, cs, all, !requireAll)
	walk := make([]bool, len(cs))
	for i := range cs {
		if kept[i] != nil && (requireAll || !emptyValue[i]) {
			s.counts[i] = kept[i]
		} else {
			walk[i] = true
		}
	}
	if slices.Contains(walk, true) {
		perNode := make([][]int64, len(all))
		pl.handle.Parallelizer().Until(ctx, len(all), func(n int) {
			node := all[n].Node()
			if requireAll && !hasAllKeys(node.Labels, cs) {
				return
			}
			counts := make([]int64, len(cs))
			for i := range cs {
				if !walk[i] || !domains[i][node.Labels[cs[i].topologyKey]] || !nodeCounted(&cs[i], required, pod.Spec.Tolerations, node) {
					counts[i] = -1
					continue
				}
				counts[i] = count(i, all[n])
			}
			perNode[n] = counts
		})
		for n, counts := range perNode {
			if counts == nil {
				continue
			}
			for i := range cs {
				if counts[i] >= 0 {
					s.counts[i][all[n].Node().Labels[cs[i].topologyKey]] += counts[i]
				}
			}
		}
	}
	for i := range cs {
		size := len(domains[i])
		if cs[i].topologyKey == v1.LabelHostname {
			size = len(filtered) - len(s.ignored)
		}
		// Weight by the domain count so keys with many small domains do not dominate.
		s.weights[i] = math.Log(float64(size + 2))
	}
	state.Write(spreadPreScoreKey, s)
	return nil
}

// Score is higher for crowded domains; NormalizeScore inverts it.
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(spreadPreScoreKey)
	if !ok {
		return 0, nil
	}
	s := d.(*spreadScoreState)
	node := ni.Node()
	if s.ignored[node.Name] {
		return 0, nil
	}
	var score float64
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := node.Labels[c.topologyKey]
		if !ok { // only under the system defaults (see PreScore)
			continue
		}
		score += float64(s.counts[i][value])*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *PodTopologySpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps lower raw scores (emptier domains) to higher results.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores []framework.NodeScore) *framework.Status {
	d, ok := state.Read(spreadPreScoreKey)
	if !ok {
		return nil
	}
	s := d.(*spreadScoreState)
	minScore, maxScore := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if s.ignored[sc.Name] {
			continue
		}
		minScore = min(minScore, sc.Score)
		maxScore = max(maxScore, sc.Score)
	}
	for i := range scores {
		if s.ignored[scores[i].Name] {
			scores[i].Score = 0
			continue
		}
		if maxScore == 0 {
			scores[i].Score = framework.MaxNodeScore
			continue
		}
		scores[i].Score = framework.MaxNodeScore * (maxScore + minScore - scores[i].Score) / maxScore
	}
	return nil
}

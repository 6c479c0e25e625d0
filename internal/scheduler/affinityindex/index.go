// Package affinityindex keeps, beside a scheduler snapshot, the per-topology-domain pod
// counts that inter-pod (anti-)affinity asks about, so that InterPodAffinity reads a few
// counts per new pod instead of walking every existing pod (as upstream does).
//
// It keeps two kinds of entry, both updated as the snapshot's nodes change (Update,
// then Finish once per snapshot refresh):
//
//   - Matched: the pods matching a group of label selectors (one required anti-affinity
//     or preferred term, or all of a pod's required affinity terms, which must match
//     together), counted per namespace and per domain of the group's topology keys.
//     Namespaces are kept apart so that a term's namespaces and namespaceSelector are
//     applied when it is read, with the namespaces' current labels. An entry exists
//     while some pod in the snapshot carries such a group: a new pod of a replica set
//     finds the counts its siblings' terms keep; a term nobody carries yet is counted
//     by a walk, by the caller, as before.
//   - Carried: the (anti-)affinity terms pods carry, grouped by the term (kind, weight,
//     namespaces, selectors, topology key), with the carriers counted per domain: a new
//     pod evaluates each distinct term once, not once per carrier.
//
// The counts equal those of upstream's walk over all pods (tests check this against a
// from-scratch count); the index holds no pod, only counts. It is written only by the
// snapshot's refresh, and read, never written, by the scheduling cycle that follows.
package affinityindex

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"mizzen/internal/scheduler/framework"
)

// Pair is one topology domain, e.g. kubernetes.io/hostname=node-1.
type Pair struct {
	Key, Value string
}

// Counts are numbers of pods per domain, without zero entries, and their sum.
type Counts struct {
	M     map[Pair]int64
	Total int64
}

func (c *Counts) add(p Pair, n int64) {
	if c.M == nil {
		c.M = map[Pair]int64{}
	}
	v := c.M[p] + n
	if v == 0 {
		delete(c.M, p)
	} else {
		c.M[p] = v
	}
	c.Total += n
}

// Kinds of carried term.
const (
	RequiredAntiAffinity uint8 = iota
	RequiredAffinity
	PreferredAffinity
	PreferredAntiAffinity
)

// Carried counts, per domain of its topology key, the pods carrying one term.
type Carried struct {
	Kind   uint8
	Weight int32 // of a preferred term
	// Term is one carrier's term; all carriers' terms are the same.
	Term framework.AffinityTerm
	Counts
	refs int // term occurrences in the snapshot, carriers on nodes without the key too
}

// matched counts, per namespace and per domain, the pods matching every selector.
type matched struct {
	selectors   []labels.Selector
	keys        []string // one per term, repeated keys counted twice as upstream
	byNamespace map[string]*Counts
	refs        int
	// fresh entries were created during the current refresh: Finish counts them.
	fresh bool
}

// Index is the snapshot's counts. The zero value is not usable: use New.
type Index struct {
	carried map[string]*Carried
	matched map[string]*matched
}

// New returns an empty index.
func New() *Index {
	return &Index{carried: map[string]*Carried{}, matched: map[string]*matched{}}
}

// Build indexes nodes from scratch.
func Build(nodes []*framework.NodeInfo) *Index {
	x := New()
	for _, ni := range nodes {
		x.Update(nil, ni)
	}
	x.Finish(nodes)
	return x
}

func selectorSig(b *strings.Builder, s labels.Selector) {
	switch {
	case s == nil:
		b.WriteString("<nil>")
	case s.Empty():
		b.WriteString("<all>")
	default:
		b.WriteString(s.String())
	}
	b.WriteByte(0)
}

// MatchedKey names the group of terms' selectors and topology keys; namespaces are not
// part of it.
func MatchedKey(terms []framework.AffinityTerm) string {
	var b strings.Builder
	for i := range terms {
		selectorSig(&b, terms[i].Selector)
	}
	b.WriteByte(1)
	for i := range terms {
		b.WriteString(terms[i].TopologyKey)
		b.WriteByte(0)
	}
	return b.String()
}

func carriedKey(kind uint8, weight int32, t *framework.AffinityTerm) string {
	var b strings.Builder
	b.WriteByte('0' + kind)
	b.WriteString(strconv.Itoa(int(weight)))
	b.WriteByte(0)
	for _, ns := range slices.Sorted(maps.Keys(t.Namespaces)) {
		b.WriteString(ns)
		b.WriteByte(',')
	}
	b.WriteByte(0)
	selectorSig(&b, t.NamespaceSelector)
	selectorSig(&b, t.Selector)
	b.WriteString(t.TopologyKey)
	return b.String()
}

// Update replaces old with new (either may be nil: a node added or removed). Only the
// pods that differ are counted again, unless the node's labels changed.
func (x *Index) Update(old, new *framework.NodeInfo) {
	if len(x.matched) == 0 && !hasTerms(old) && !hasTerms(new) {
		return
	}
	if old == nil || new == nil || !maps.Equal(old.Labels(), new.Labels()) {
		if old != nil {
			for _, p := range old.Pods {
				x.pod(p, old.Labels(), -1)
			}
		}
		if new != nil {
			for _, p := range new.Pods {
				x.pod(p, new.Labels(), 1)
			}
		}
		return
	}
	added, removed := framework.ChangedPods(old.Pods, new.Pods)
	for _, p := range removed {
		x.pod(p, old.Labels(), -1)
	}
	for _, p := range added {
		x.pod(p, new.Labels(), 1)
	}
}

func hasTerms(ni *framework.NodeInfo) bool { return ni != nil && len(ni.PodsWithAffinity) > 0 }

// pod adds (sign 1) or removes (sign -1) one pod on a node with nodeLabels.
func (x *Index) pod(p *framework.PodInfo, nodeLabels map[string]string, sign int64) {
	if p.HasAffinity() {
		for i := range p.RequiredAntiAffinityTerms {
			x.carry(RequiredAntiAffinity, 0, &p.RequiredAntiAffinityTerms[i], nodeLabels, sign)
			x.ref(p.RequiredAntiAffinityTerms[i:i+1], sign)
		}
		for i := range p.RequiredAffinityTerms {
			x.carry(RequiredAffinity, 0, &p.RequiredAffinityTerms[i], nodeLabels, sign)
		}
		if len(p.RequiredAffinityTerms) > 0 {
			x.ref(p.RequiredAffinityTerms, sign)
		}
		for i := range p.PreferredAffinityTerms {
			t := &p.PreferredAffinityTerms[i]
			x.carry(PreferredAffinity, t.Weight, &t.AffinityTerm, nodeLabels, sign)
			x.ref([]framework.AffinityTerm{t.AffinityTerm}, sign)
		}
		for i := range p.PreferredAntiAffinityTerms {
			t := &p.PreferredAntiAffinityTerms[i]
			x.carry(PreferredAntiAffinity, t.Weight, &t.AffinityTerm, nodeLabels, sign)
			x.ref([]framework.AffinityTerm{t.AffinityTerm}, sign)
		}
	}
	if len(x.matched) == 0 {
		return
	}
	set := labels.Set(p.Pod.Labels)
	for _, m := range x.matched {
		if !m.fresh && m.matches(set) {
			m.count(p.Pod.Namespace, nodeLabels, sign)
		}
	}
}

func (m *matched) matches(set labels.Set) bool {
	for _, s := range m.selectors {
		if s == nil || !s.Matches(set) {
			return false
		}
	}
	return true
}

func (m *matched) count(ns string, nodeLabels map[string]string, sign int64) {
	c := m.byNamespace[ns]
	if c == nil {
		c = &Counts{}
		m.byNamespace[ns] = c
	}
	for _, k := range m.keys {
		if v, ok := nodeLabels[k]; ok {
			c.add(Pair{k, v}, sign)
		}
	}
	if len(c.M) == 0 {
		delete(m.byNamespace, ns)
	}
}

func (x *Index) carry(kind uint8, weight int32, t *framework.AffinityTerm, nodeLabels map[string]string, sign int64) {
	key := carriedKey(kind, weight, t)
	c := x.carried[key]
	if c == nil {
		c = &Carried{Kind: kind, Weight: weight, Term: *t}
		x.carried[key] = c
	}
	c.refs += int(sign)
	if v, ok := nodeLabels[t.TopologyKey]; ok {
		c.add(Pair{t.TopologyKey, v}, sign)
	}
}

func (x *Index) ref(terms []framework.AffinityTerm, sign int64) {
	key := MatchedKey(terms)
	m := x.matched[key]
	if m == nil {
		m = &matched{byNamespace: map[string]*Counts{}, fresh: true}
		for i := range terms {
			m.selectors = append(m.selectors, terms[i].Selector)
			m.keys = append(m.keys, terms[i].TopologyKey)
		}
		x.matched[key] = m
	}
	m.refs += int(sign)
}

// Finish ends a refresh: it drops the entries no pod carries any more and counts the new
// ones over nodes, the snapshot's nodes after the refresh.
func (x *Index) Finish(nodes []*framework.NodeInfo) {
	var fresh []*matched
	for key, m := range x.matched {
		switch {
		case m.refs <= 0:
			delete(x.matched, key)
		case m.fresh:
			fresh = append(fresh, m)
		}
	}
	for key, c := range x.carried {
		if c.refs <= 0 {
			delete(x.carried, key)
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, ni := range nodes {
		for _, p := range ni.Pods {
			set := labels.Set(p.Pod.Labels)
			for _, m := range fresh {
				if m.matches(set) {
					m.count(p.Pod.Namespace, ni.Labels(), 1)
				}
			}
		}
	}
	for _, m := range fresh {
		m.fresh = false
	}
}

// Matching returns the counts of pods matching all terms (one term, or all of a pod's
// required affinity terms), one Counts per namespace every term selects, with the
// domains of the terms' topology keys; nsLabels gives a namespace's labels for terms
// with a namespaceSelector. ok is false when no entry counts these terms: the caller
// counts them itself.
func (x *Index) Matching(terms []framework.AffinityTerm, nsLabels func(ns string) labels.Set) (counts []*Counts, ok bool) {
	if x == nil || len(terms) == 0 {
		return nil, false
	}
	m := x.matched[MatchedKey(terms)]
	if m == nil || m.fresh {
		return nil, false
	}
	for ns, c := range m.byNamespace {
		if namespaceSelected(terms, ns, nsLabels) {
			counts = append(counts, c)
		}
	}
	return counts, true
}

func namespaceSelected(terms []framework.AffinityTerm, ns string, nsLabels func(string) labels.Set) bool {
	for i := range terms {
		t := &terms[i]
		if t.Namespaces.Has(ns) {
			continue
		}
		if t.NamespaceSelector == nil || !t.NamespaceSelector.Matches(nsLabels(ns)) {
			return false
		}
	}
	return true
}

// Carriers returns the carried terms of the given kinds that match pod (living in a
// namespace with nsLabels), with their carriers per domain.
func (x *Index) Carriers(pod *v1.Pod, nsLabels labels.Set, kinds ...uint8) []*Carried {
	if x == nil {
		return nil
	}
	var out []*Carried
	for _, c := range x.carried {
		if slices.Contains(kinds, c.Kind) && c.Total > 0 && c.Term.Matches(pod, nsLabels) {
			out = append(out, c)
		}
	}
	return out
}

// String lists every entry and count, sorted: two indexes holding the same counts print
// the same (tests compare an index kept up to date with one built from scratch).
func (x *Index) String() string {
	var lines []string
	for key, c := range x.carried {
		lines = append(lines, fmt.Sprintf("carried %q refs=%d %s", key, c.refs, &c.Counts))
	}
	for key, m := range x.matched {
		lines = append(lines, fmt.Sprintf("matched %q refs=%d fresh=%t", key, m.refs, m.fresh))
		for ns, c := range m.byNamespace {
			lines = append(lines, fmt.Sprintf("matched %q ns=%s %s", key, ns, c))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// String prints the counts sorted by domain.
func (c *Counts) String() string {
	pairs := make([]string, 0, len(c.M))
	for p, n := range c.M {
		pairs = append(pairs, fmt.Sprintf("%s=%s:%d", p.Key, p.Value, n))
	}
	slices.Sort(pairs)
	return fmt.Sprintf("total=%d [%s]", c.Total, strings.Join(pairs, " "))
}

// Package spreadindex keeps, beside a scheduler snapshot, the per-topology-domain counts
// of pods matching a topology spread constraint's selector, so that PodTopologySpread's
// PreFilter and PreScore read one count per domain instead of walking every pod of every
// node for each new pod (as upstream does).
//
// An entry counts the pods of one namespace matching one selector, per value of one
// topology key, over the nodes carrying every key of a key set (the keys of all the
// constraints a pod has of one kind: a node lacking any of them takes no part). Entries
// are made on first use, by one walk over the snapshot's nodes, and then kept up to date
// from the nodes each snapshot refresh replaces (Update, then Finish), so the pods of a
// workload, whose constraints repeat, share them. Only the least recently read entries
// are kept (maxEntries), and entries not read for a while are dropped.
//
// An entry holds every domain of a node with all its keys, zero counts included, as
// upstream's walk finds them when every such node counts; counts per node serve pods
// for which some nodes do not count (node affinity or taints honoured). Terminating pods
// are not counted, as upstream. Tests check every entry against a from-scratch count.
//
// Entries are written by the snapshot's refresh and made by Lookup, both from the
// scheduler's sequential phases; the maps Lookup returns must be read only, and only
// until the next refresh.
package spreadindex

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"mizzen/internal/scheduler/framework"
)

const (
	// maxEntries bounds the selectors counted at once: each costs a selector match per
	// pod that comes or goes.
	maxEntries = 32
	// idleRefreshes drops an entry not read during that many snapshot refreshes.
	idleRefreshes = 2048
)

// Entry counts the pods of one namespace matching one selector.
type Entry struct {
	ns       string
	selector labels.Selector
	key      string
	keys     []string
	// domains maps each value of key on a node carrying all keys to the matching pods
	// on such nodes (zero included); nodes counts those nodes per value.
	domains map[string]int64
	nodes   map[string]int
	// perNode counts matching pods per node name, on any node, without zeros.
	perNode map[string]int64
	lastUse uint64
}

// Domains returns the matching pods per domain, every domain of a node with all the
// entry's keys present (zero counts too). Read only.
func (e *Entry) Domains() map[string]int64 { return e.domains }

// OnNode returns the matching pods on one node.
func (e *Entry) OnNode(name string) int64 { return e.perNode[name] }

// Index is the snapshot's spread counts. The zero value is not usable: use New.
type Index struct {
	mu      sync.Mutex
	entries map[string]*Entry
	// tainted counts nodes with a NoSchedule or NoExecute taint: when there are none,
	// a nodeTaintsPolicy of Honor excludes no node.
	tainted int
	refresh uint64
}

// New returns an empty index.
func New() *Index { return &Index{entries: map[string]*Entry{}} }

// HardTainted reports whether a node has a taint that filters pods (NoSchedule or
// NoExecute), the taints a nodeTaintsPolicy of Honor looks at.
func HardTainted(taints []v1.Taint) bool {
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoSchedule || taints[i].Effect == v1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// TaintedNodes is the number of nodes with a NoSchedule or NoExecute taint.
func (x *Index) TaintedNodes() int { return x.tainted }

// SelectorKey names a selector: labels.Everything and labels.Nothing both print as "".
func SelectorKey(s labels.Selector) string {
	switch {
	case s == nil:
		return "\x00nil"
	case s.Empty():
		return "\x00all"
	default:
		return s.String()
	}
}

func entryKey(ns string, sel labels.Selector, key string, keys []string) string {
	var b strings.Builder
	b.WriteString(ns)
	b.WriteByte(0)
	b.WriteString(SelectorKey(sel))
	b.WriteByte(0)
	b.WriteString(key)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
	}
	return b.String()
}

// KeySet returns the distinct keys, sorted: the form Lookup takes.
func KeySet(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

// Lookup returns the entry counting the pods of namespace ns matching sel per value of
// key over the nodes carrying all of keys (a KeySet including key), making it from
// nodes, the snapshot's nodes, when new.
func (x *Index) Lookup(ns string, sel labels.Selector, key string, keys []string, nodes []*framework.NodeInfo) *Entry {
	k := entryKey(ns, sel, key, keys)
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entries[k]
	if e == nil {
		if len(x.entries) >= maxEntries {
			x.evictOldest()
		}
		e = &Entry{ns: ns, selector: sel, key: key, keys: keys,
			domains: map[string]int64{}, nodes: map[string]int{}, perNode: map[string]int64{}}
		for _, ni := range nodes {
			e.node(ni, 1)
		}
		x.entries[k] = e
	}
	e.lastUse = x.refresh
	return e
}

func (x *Index) evictOldest() {
	var oldest string
	var at uint64
	first := true
	for k, e := range x.entries {
		if first || e.lastUse < at {
			oldest, at, first = k, e.lastUse, false
		}
	}
	delete(x.entries, oldest)
}

func (e *Entry) hasKeys(nodeLabels map[string]string) bool {
	for _, k := range e.keys {
		if _, ok := nodeLabels[k]; !ok {
			return false
		}
	}
	return true
}

func (e *Entry) matches(p *framework.PodInfo) bool {
	return p.Pod.Namespace == e.ns && p.Pod.DeletionTimestamp == nil && e.selector != nil && e.selector.Matches(labels.Set(p.Pod.Labels))
}

// node adds (sign 1) or removes (sign -1) a node with all its pods.
func (e *Entry) node(ni *framework.NodeInfo, sign int) {
	var n int64
	for _, p := range ni.Pods {
		if e.matches(p) {
			n++
		}
	}
	e.addOnNode(ni.Name(), n*int64(sign))
	if !e.hasKeys(ni.Labels()) {
		return
	}
	v := ni.Labels()[e.key]
	e.nodes[v] += sign
	if e.nodes[v] <= 0 {
		delete(e.nodes, v)
		delete(e.domains, v)
		return
	}
	e.domains[v] += n * int64(sign)
}

func (e *Entry) addOnNode(name string, n int64) {
	if n == 0 {
		return
	}
	if c := e.perNode[name] + n; c == 0 {
		delete(e.perNode, name)
	} else {
		e.perNode[name] = c
	}
}

// pod adds (sign 1) or removes (sign -1) one pod of a node.
func (e *Entry) pod(p *framework.PodInfo, ni *framework.NodeInfo, sign int64) {
	if !e.matches(p) {
		return
	}
	e.addOnNode(ni.Name(), sign)
	if e.hasKeys(ni.Labels()) {
		e.domains[ni.Labels()[e.key]] += sign
	}
}

// Update replaces old with new (either may be nil: a node added or removed). Only the
// pods that differ are counted again, unless the node's labels changed.
func (x *Index) Update(old, new *framework.NodeInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old != nil && HardTainted(old.Taints()) {
		x.tainted--
	}
	if new != nil && HardTainted(new.Taints()) {
		x.tainted++
	}
	if len(x.entries) == 0 {
		return
	}
	if old == nil || new == nil || old.Name() != new.Name() || !maps.Equal(old.Labels(), new.Labels()) {
		for _, e := range x.entries {
			if old != nil {
				e.node(old, -1)
			}
			if new != nil {
				e.node(new, 1)
			}
		}
		return
	}
	added, removed := framework.ChangedPods(old.Pods, new.Pods)
	for _, e := range x.entries {
		for _, p := range removed {
			e.pod(p, old, -1)
		}
		for _, p := range added {
			e.pod(p, new, 1)
		}
	}
}

// Finish ends a snapshot refresh: entries not read for idleRefreshes refreshes go.
func (x *Index) Finish() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.refresh++
	for k, e := range x.entries {
		if x.refresh-e.lastUse > idleRefreshes {
			delete(x.entries, k)
		}
	}
}

// Check compares every entry with a count from scratch over nodes, for tests.
func (x *Index) Check(nodes []*framework.NodeInfo) error {
	tainted := 0
	for _, ni := range nodes {
		if HardTainted(ni.Taints()) {
			tainted++
		}
	}
	if tainted != x.tainted {
		return fmt.Errorf("tainted nodes: kept %d, counted %d", x.tainted, tainted)
	}
	for k, e := range x.entries {
		f := &Entry{ns: e.ns, selector: e.selector, key: e.key, keys: e.keys,
			domains: map[string]int64{}, nodes: map[string]int{}, perNode: map[string]int64{}}
		for _, ni := range nodes {
			f.node(ni, 1)
		}
		if !maps.Equal(e.domains, f.domains) || !maps.Equal(e.nodes, f.nodes) || !maps.Equal(e.perNode, f.perNode) {
			return fmt.Errorf("entry %q: kept domains %v nodes %v per node %v, counted %v %v %v",
				k, e.domains, e.nodes, e.perNode, f.domains, f.nodes, f.perNode)
		}
	}
	return nil
}

// Len is the number of entries.
func (x *Index) Len() int { return len(x.entries) }

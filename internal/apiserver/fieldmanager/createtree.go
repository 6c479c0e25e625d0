package fieldmanager

import (
	"errors"
	"slices"
	"sync"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldTree collects the paths a create's walk records (added and modified alike: a
// create keeps their union) and writes them as the managedFields JSON the library's
// Set.ToJSON writes for that union, filtered and stripped as createWalk's callers
// need, without building a fieldpath.Set: the set's sorted inserts (a binary search
// and a slice insert per path, at every level) and its separate filter, difference
// and serialization walks were a third of a create's field tracking.
//
// The walk is depth first and visits a node's children once each, so a path's
// elements are found as the last child added at each level; a node is never looked
// up among its earlier siblings. Should a walk record the same element twice under
// one parent as two nodes (the value walk of a node whose empty-object atom differs),
// writing finds the two adjacent once sorted and fails, and the caller takes the
// library's path.
type fieldTree struct {
	nodes   []treeNode // nodes[0] is the root (the empty path)
	scratch []int32    // children being written, a segment per level
	name    []byte     // a field name's element being built
	path    fieldpath.Path

	// The last inserted path, element by element, and its nodes: the walk inserts
	// paths depth first, so the next one shares its prefix, found by the elements'
	// identity (the walk pushes the same element for a parent while it visits its
	// children) rather than by comparing them at every level.
	lastPath  fieldpath.Path
	lastNodes []int32
}

type treeNode struct {
	pe     fieldpath.PathElement
	member bool // the path to this node was recorded (not only a path below it)
	// kept says the node is written: a member not stripped, or above one (set by mark).
	kept              bool
	first, last, next int32 // children (first, last), next sibling; -1: none
}

var errTreeDuplicate = errors.New("a path element recorded twice under one parent")

var fieldTrees = sync.Pool{New: func() any { return &fieldTree{} }}

func newFieldTree() *fieldTree {
	t := fieldTrees.Get().(*fieldTree)
	t.reset()
	return t
}

// release returns t to the pool, dropping what its elements point at (names and keys
// of the walked object).
func (t *fieldTree) release() {
	if cap(t.nodes) > maxPooledNodes {
		return // a big object's tree is not kept for the next create
	}
	clear(t.nodes)
	clear(t.path)
	clear(t.lastPath)
	t.nodes, t.path = t.nodes[:0], t.path[:0]
	t.lastPath, t.lastNodes = t.lastPath[:0], t.lastNodes[:0]
	fieldTrees.Put(t)
}

// maxPooledNodes is the most nodes a pooled tree keeps room for (a pod has ~50).
const maxPooledNodes = 1024

func (t *fieldTree) reset() {
	clear(t.nodes)
	t.nodes = append(t.nodes[:0], treeNode{first: -1, last: -1, next: -1})
	clear(t.lastPath)
	t.lastPath, t.lastNodes = t.lastPath[:0], t.lastNodes[:0]
}

// insert records path p, as Set.Insert does: the empty path is not recorded.
func (t *fieldTree) insert(p fieldpath.Path) {
	if len(p) == 0 {
		return
	}
	// The shared prefix's nodes are what child would find again: each is its
	// parent's last child, since every insert since went through it.
	i := 0
	for i < len(p) && i < len(t.lastPath) && sameElement(p[i], t.lastPath[i]) {
		i++
	}
	t.lastPath, t.lastNodes = t.lastPath[:i], t.lastNodes[:i]
	n := int32(0)
	if i > 0 {
		n = t.lastNodes[i-1]
	}
	for _, pe := range p[i:] {
		n = t.child(n, pe)
		t.lastPath = append(t.lastPath, pe)
		t.lastNodes = append(t.lastNodes, n)
	}
	t.nodes[n].member = true
}

// sameElement says a and b are the same element, not only equal ones: both point at
// the same name, key, value or index.
func sameElement(a, b fieldpath.PathElement) bool {
	return a.FieldName == b.FieldName && a.Key == b.Key && a.Value == b.Value && a.Index == b.Index
}

// child is parent's child for pe: its last child if that is pe (by Compare, as the
// set's own inserts find elements), else a new one.
func (t *fieldTree) child(parent int32, pe fieldpath.PathElement) int32 {
	if c := t.nodes[parent].last; c >= 0 && t.nodes[c].pe.Compare(pe) == 0 {
		return c
	}
	c := int32(len(t.nodes))
	t.nodes = append(t.nodes, treeNode{pe: pe, first: -1, last: -1, next: -1})
	if p := &t.nodes[parent]; p.last < 0 {
		p.first, p.last = c, c
	} else {
		t.nodes[p.last].next = c
		p.last = c
	}
	return c
}

// toJSON writes the union's managedFields JSON as Set.ToJSON writes the set after
// fieldpath.NewExcludeSetFilter of the root field excludeRoot (none if empty) and the
// Difference with stripped; nil when nothing is left (the library's empty set).
func (t *fieldTree) toJSON(excludeRoot string, stripped *fieldpath.Set) ([]byte, error) {
	if !t.mark(0, excludeRoot, stripped) {
		return nil, nil
	}
	s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
	s.WriteObjectStart()
	if err := t.write(s, 0); err != nil {
		return nil, err
	}
	s.WriteObjectEnd()
	if s.Error != nil {
		return nil, s.Error
	}
	return slices.Clone(s.Buffer()), nil
}

// mark sets kept on n and below and says whether n is kept. A member stays a member
// unless stripped lists its path (Difference removes members only, and drops what
// has nothing left under it); the excluded root field goes with everything under it
// (RecursiveDifference of a set holding only that member).
func (t *fieldTree) mark(n int32, excludeRoot string, stripped *fieldpath.Set) bool {
	node := &t.nodes[n]
	if n != 0 && node.member && stripped.Has(t.path) {
		node.member = false
	}
	kept := node.member
	for c := node.first; c >= 0; c = t.nodes[c].next {
		pe := t.nodes[c].pe
		if n == 0 && excludeRoot != "" && pe.FieldName != nil && *pe.FieldName == excludeRoot {
			continue
		}
		t.path = append(t.path, pe)
		if t.mark(c, excludeRoot, stripped) {
			kept = true
		}
		t.path = t.path[:len(t.path)-1]
	}
	t.nodes[n].kept = kept
	return kept
}

// write writes the kept children of n (and "." first when n is itself a member with
// kept children, as emitContentsV1 does) in the set's order.
func (t *fieldTree) write(s *jsoniter.Stream, n int32) error {
	start := len(t.scratch)
	for c := t.nodes[n].first; c >= 0; c = t.nodes[c].next {
		if t.nodes[c].kept {
			t.scratch = append(t.scratch, c)
		}
	}
	defer func() { t.scratch = t.scratch[:start] }()
	kids := len(t.scratch) - start
	if err := t.sortKids(t.scratch[start:]); err != nil {
		return err
	}
	first := true
	if n != 0 && t.nodes[n].member && kids > 0 {
		s.WriteObjectField(".")
		s.WriteEmptyObject()
		first = false
	}
	for i := range kids {
		// t.scratch may grow (and move) below: read the child from it afresh.
		c := t.scratch[start+i]
		if !first {
			s.WriteMore()
		}
		first = false
		if err := t.writeElement(s, t.nodes[c].pe); err != nil {
			return err
		}
		if !t.hasKeptChild(c) {
			s.WriteEmptyObject()
			continue
		}
		s.WriteObjectStart()
		if err := t.write(s, c); err != nil {
			return err
		}
		s.WriteObjectEnd()
	}
	return nil
}

// sortKids sorts a node's children in the set's order, and fails if two are equal.
// A struct's fields come in that order already (the walk visits them by name), which
// one pass confirms.
func (t *fieldTree) sortKids(kids []int32) error {
	compare := func(a, b int32) int { return t.nodes[a].pe.Compare(t.nodes[b].pe) }
	increasing := true
	for i := 1; i < len(kids) && increasing; i++ {
		increasing = compare(kids[i-1], kids[i]) < 0
	}
	if increasing {
		return nil
	}
	slices.SortFunc(kids, compare)
	for i := 1; i < len(kids); i++ {
		if compare(kids[i-1], kids[i]) == 0 {
			return errTreeDuplicate
		}
	}
	return nil
}

func (t *fieldTree) hasKeptChild(n int32) bool {
	for c := t.nodes[n].first; c >= 0; c = t.nodes[c].next {
		if t.nodes[c].kept {
			return true
		}
	}
	return false
}

// writeElement writes pe as an object's field name, as the library serializes it: a
// field as "f:" and its name unescaped, then the whole escaped as a JSON string.
func (t *fieldTree) writeElement(s *jsoniter.Stream, pe fieldpath.PathElement) error {
	if pe.FieldName != nil {
		t.name = append(append(t.name[:0], "f:"...), *pe.FieldName...)
		s.WriteObjectField(unsafe.String(unsafe.SliceData(t.name), len(t.name)))
		return nil
	}
	str, err := fieldpath.SerializePathElement(pe)
	if err != nil {
		return err
	}
	s.WriteObjectField(str)
	return nil
}

package fieldmanager

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// names are field names a random tree picks from: the stripped and excluded ones, and
// ones JSON must escape (the library escapes the whole "f:" element as a string).
var treeNames = []string{
	"apiVersion", "kind", "metadata", "name", "namespace", "uid", "resourceVersion",
	"generation", "managedFields", "labels", "status", "spec", "a", "b", "",
	"a<b>&c", "q\"uote\\", "é", "line\u2028sep", "tab\t", "\x00nul", "bad\xffutf8", "slash/dot.x",
}

// randomElement is a field, a key, a value or an index.
func randomElement(r *rand.Rand) fieldpath.PathElement {
	switch r.IntN(8) {
	case 0:
		k := value.FieldList{{Name: "name", Value: value.NewValueInterface(treeNames[r.IntN(len(treeNames))])}}
		if r.IntN(2) == 0 {
			k = append(k, value.Field{Name: "port", Value: value.NewValueInterface(int64(r.IntN(3)))})
		}
		return fieldpath.PathElement{Key: &k}
	case 1:
		var v value.Value
		switch r.IntN(3) {
		case 0:
			v = value.NewValueInterface(treeNames[r.IntN(len(treeNames))])
		case 1:
			v = value.NewValueInterface(int64(r.IntN(4)))
		default:
			v = value.NewValueInterface(r.IntN(2) == 0)
		}
		return fieldpath.PathElement{Value: &v}
	case 2:
		i := r.IntN(4)
		return fieldpath.PathElement{Index: &i}
	}
	name := treeNames[r.IntN(len(treeNames))]
	return fieldpath.PathElement{FieldName: &name}
}

// growTree records random paths below p depth first, as the create walks do, in the
// tree and in a set.
func growTree(r *rand.Rand, t *fieldTree, set *fieldpath.Set, p fieldpath.Path, depth int) {
	var seen []fieldpath.PathElement
	for range r.IntN(5) {
		pe := randomElement(r)
		if depth == 0 && r.IntN(3) == 0 {
			name := []string{"metadata", "status", "apiVersion", "kind"}[r.IntN(4)]
			pe = fieldpath.PathElement{FieldName: &name}
		}
		dup := false
		for _, s := range seen {
			dup = dup || s.Compare(pe) == 0
		}
		if dup {
			continue
		}
		seen = append(seen, pe)
		child := append(p.Copy(), pe)
		before, after := r.IntN(3) == 0, r.IntN(2) == 0
		if before {
			t.insert(child)
			set.Insert(child)
		}
		if depth < 4 && r.IntN(2) == 0 {
			growTree(r, t, set, child, depth+1)
		} else {
			after = true
		}
		if after {
			t.insert(child)
			set.Insert(child)
			if r.IntN(4) == 0 {
				t.insert(child) // recorded twice, as added and modified may
			}
		}
	}
}

// TestFieldTreeIsTheSetsJSON: for random sets recorded depth first, the tree writes
// what the library writes for the set filtered of status (or not) and stripped.
func TestFieldTreeIsTheSetsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 3))
	nonEmpty := 0
	for i := range 5000 {
		if compareFieldTree(t, r, i%2 == 0) {
			nonEmpty++
		}
	}
	if nonEmpty < 1000 {
		t.Errorf("only %d of the random sets were non-empty", nonEmpty)
	}
}

// FuzzFieldTree is TestFieldTreeIsTheSetsJSON's comparison for the sets the fuzzer's
// seeds grow.
func FuzzFieldTree(f *testing.F) {
	f.Add(uint64(1), uint64(2), true)
	f.Add(uint64(16), uint64(3), false)
	f.Fuzz(func(t *testing.T, a, b uint64, status bool) {
		compareFieldTree(t, rand.New(rand.NewPCG(a, b)), status)
	})
}

// compareFieldTree grows a random set and compares the tree's JSON with the
// library's; it says whether the set was non-empty.
func compareFieldTree(t *testing.T, r *rand.Rand, status bool) bool {
	t.Helper()
	tree := newFieldTree()
	defer tree.release()
	set := fieldpath.NewSet()
	growTree(r, tree, set, nil, 0)
	excluded := ""
	want := set
	if status {
		excluded = "status"
		want = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status"))).Filter(want)
	}
	want = want.Difference(stripped)
	var wantJSON []byte
	if !want.Empty() {
		var err error
		if wantJSON, err = want.ToJSON(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tree.toJSON(excluded, stripped)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantJSON) {
		t.Fatalf("excluded %q:\n got %s\nwant %s", excluded, got, wantJSON)
	}
	return wantJSON != nil
}

// TestFieldTreeDeclinesAnElementRecordedTwice: an element met again after a sibling
// (which the walks do not do) is two nodes; writing fails rather than write them twice.
func TestFieldTreeDeclinesAnElementRecordedTwice(t *testing.T) {
	tree := newFieldTree()
	defer tree.release()
	tree.insert(fieldpath.MakePathOrDie("spec", "a"))
	tree.insert(fieldpath.MakePathOrDie("spec", "b"))
	tree.insert(fieldpath.MakePathOrDie("spec", "a", "c"))
	if got, err := tree.toJSON("", stripped); err == nil {
		t.Errorf("wrote %s, want an error", got)
	}
}

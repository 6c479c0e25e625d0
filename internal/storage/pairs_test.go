package storage

import (
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// TestPairsMatchAsTheirMap: label and field selectors give the same answer on an
// entry's pairs as on the map they were made from.
func TestPairsMatchAsTheirMap(t *testing.T) {
	sets := []map[string]string{nil, {}, {"app": "web"}, {"app": "web", "tier": "front", "a": "", "z/x": "1"}}
	labelSelectors := []string{"", "app", "!app", "app=web", "app!=web", "tier in (front,back)", "a", "a=", "z/x=1,app=web", "missing", "!missing"}
	for _, m := range sets {
		p := PairsOf(m)
		if len(p) != 2*len(m) {
			t.Errorf("%v: pairs %v", m, p)
		}
		for _, s := range labelSelectors {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sel.Matches(p), sel.Matches(labels.Set(m)); got != want {
				t.Errorf("labels %v, selector %q: pairs match %v, map %v", m, s, got, want)
			}
		}
		for _, s := range []string{"", "app=web", "app!=web", "tier=front,app=web", "missing=", "missing!=x"} {
			sel, err := fields.ParseSelector(s)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sel.Matches(p), sel.Matches(fields.Set(m)); got != want {
				t.Errorf("fields %v, selector %q: pairs match %v, map %v", m, s, got, want)
			}
		}
		for k, v := range m {
			if got, ok := p.Lookup(k); !ok || got != v {
				t.Errorf("%v: Lookup(%q) = %q, %v", m, k, got, ok)
			}
		}
	}
}

// TestPairsOfSortsLikeItsKeys: for random maps of every size up to 40 (both ways of
// sorting), the pairs are the map's keys in sorted order, each followed by its value.
func TestPairsOfSortsLikeItsKeys(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 2000; n++ {
		m := map[string]string{}
		for size := r.Intn(41); len(m) < size; {
			// Short keys from few letters: shared prefixes, and keys that are
			// prefixes of others.
			k := make([]byte, 1+r.Intn(4))
			for i := range k {
				k[i] = "ab/."[r.Intn(4)]
			}
			m[string(k)] = strconv.Itoa(r.Intn(100))
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var want Pairs
		for _, k := range keys {
			want = append(want, k, m[k])
		}
		if got := PairsOf(m); !slices.Equal(got, want) {
			t.Fatalf("PairsOf(%v) = %v, want %v", m, got, want)
		}
	}
}

package storage

import "sort"

// Pairs is a small set of key/value pairs kept in one sorted slice (key, value, key,
// value, ...): an entry's labels or selectable fields. An object has a few of each,
// and a Go map of a few entries takes several times the memory of the strings in it;
// a cache holds one set of each per object. Pairs implements labels.Labels and
// fields.Fields, so selectors match it directly.
type Pairs []string

// PairsOf returns m's pairs (nil for an empty m). The pairs are sorted in place, in
// their one slice, rather than through a slice of the keys: a write makes two of
// these (labels and fields) for the cache.
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return nil
	}
	p := make(Pairs, 0, 2*len(m))
	for k, v := range m {
		p = append(p, k, v)
	}
	return p.Sorted()
}

// Sorted sorts pairs given in any order (key, value, key, value, ...) by their keys,
// in place, and returns them: a Pairs built without a map first.
func (p Pairs) Sorted() Pairs {
	if len(p) <= 32 {
		// Insertion sort of the pairs: a few comparisons each for the usual handful.
		for i := 2; i < len(p); i += 2 {
			for j := i; j > 0 && p[j] < p[j-2]; j -= 2 {
				p[j], p[j+1], p[j-2], p[j-1] = p[j-2], p[j-1], p[j], p[j+1]
			}
		}
	} else {
		sort.Sort(byKey(p))
	}
	return p
}

// byKey sorts pairs by their keys.
type byKey Pairs

func (p byKey) Len() int           { return len(p) / 2 }
func (p byKey) Less(i, j int) bool { return p[2*i] < p[2*j] }
func (p byKey) Swap(i, j int) {
	p[2*i], p[2*i+1], p[2*j], p[2*j+1] = p[2*j], p[2*j+1], p[2*i], p[2*i+1]
}

// Lookup returns key's value and whether key is there.
func (p Pairs) Lookup(key string) (string, bool) {
	i := sort.Search(len(p)/2, func(i int) bool { return p[2*i] >= key })
	if 2*i < len(p) && p[2*i] == key {
		return p[2*i+1], true
	}
	return "", false
}

// Has reports whether key is there.
func (p Pairs) Has(key string) bool {
	_, ok := p.Lookup(key)
	return ok
}

// Get returns key's value, or "" when it is not there.
func (p Pairs) Get(key string) string {
	v, _ := p.Lookup(key)
	return v
}

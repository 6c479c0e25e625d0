package storage

import "sort"

// Pairs is a small set of key/value pairs kept in one sorted slice (key, value, key,
// value, ...): an entry's labels or selectable fields. An object has a few of each,
// and a Go map of a few entries takes several times the memory of the strings in it;
// a cache holds one set of each per object. Pairs implements labels.Labels and
// fields.Fields, so selectors match it directly.
type Pairs []string

// PairsOf returns m's pairs (nil for an empty m).
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p := make(Pairs, 0, 2*len(m))
	for _, k := range keys {
		p = append(p, k, m[k])
	}
	return p
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

package storage

import "google.golang.org/protobuf/encoding/protowire"

// BuiltBothWays is the cache entry of value (obj's storage encoding) at key and rev,
// built from a record of this server's put and by decoding value; fast is nil when
// the record could not build it.
func BuiltBothWays(cfg *ResourceConfig, key string, value []byte, rev int64, fields func() Pairs, labels Pairs) (fast, slow *Entry, err error) {
	if w := wrapOf(cfg); w != nil {
		fast = (&written{cfg: cfg, wrap: w, value: value, labels: labels, fields: fields()}).entry(key, rev)
	}
	slow, err = decodeEntry(cfg, key, value, rev)
	return fast, slow, err
}

// EntriesOfOnePut are the entries the cache (taking the put's event) and the writer
// (answered that the put succeeded at rev) get from one record of value, the cache
// asking first when cacheFirst.
func EntriesOfOnePut(cfg *ResourceConfig, key string, value []byte, rev int64, cacheFirst bool) (cacheGot, writerGot *Entry) {
	w := &written{cfg: cfg, wrap: wrapOf(cfg), value: value}
	if cacheFirst {
		cacheGot = w.entry(key, rev)
		return cacheGot, w.builtEntry(key, rev)
	}
	writerGot = w.builtEntry(key, rev)
	return w.entry(key, rev), writerGot
}

// WithResourceVersion is unknownWrap.withResourceVersion without a wrap: the
// message alone.
func WithResourceVersion(msg []byte, rev int64) ([]byte, bool) {
	out, ok := (&unknownWrap{}).withResourceVersion(msg, rev)
	if !ok {
		return nil, false
	}
	_, n := protowire.ConsumeVarint(out)
	return out[n:], true
}

// Wraps reports whether the cache of cfg can build entries from its puts.
func Wraps(cfg *ResourceConfig) bool { return wrapOf(cfg) != nil }

// PendingPuts is how many of this server's puts the cache still waits for.
func (c *Cache) PendingPuts() int {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	return len(c.written)
}

// EncodeForStore is what the store puts for obj.
var EncodeForStore = encodeForStore

// StoredMagic prefixes a protobuf value in etcd.
var StoredMagic = protoMagic

// EntriesFromPuts is how many entries the cache built from its server's puts.
func (c *Cache) EntriesFromPuts() int64 { return c.fromPuts.Load() }

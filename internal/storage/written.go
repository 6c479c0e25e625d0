package storage

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// written is a value this server is putting at a key, with what the watch cache
// would otherwise decode the value for: when the put's event comes back from etcd
// carrying exactly these bytes, the cache builds its entry from them (see entry)
// instead of decoding the value and encoding the object again, which was most of
// what following a create cost it. The byte comparison is what makes this safe:
// equal bytes are the same object, whoever put them and whenever.
type written struct {
	cfg    *ResourceConfig
	wrap   *unknownWrap
	value  []byte
	labels Pairs
	fields Pairs
	// built is the entry of the put, made by whichever of the writer (once the put
	// succeeded) and the cache (once its event came back) asked first; the other
	// takes it rather than making a second one (see entry).
	built atomic.Pointer[Entry]
}

// expectPut tells the cache that this server is about to put value, obj's storage
// encoding, at key. It returns the record to hand to forgetPut if the put fails or
// may have failed, or nil when the cache cannot use it (a resource it does not keep
// as protobuf). obj is read here, in the writer's goroutine, and not kept: the
// writer goes on to change it (its resourceVersion) while the cache works.
func (c *Cache) expectPut(key string, value []byte, obj runtime.Object) *written {
	if c == nil || !bytes.HasPrefix(value, protoMagic) {
		return nil
	}
	c.mu.RLock()
	rc := c.resources[segmentOf(key)]
	var cfg *ResourceConfig
	var wrap *unknownWrap
	if rc != nil {
		cfg, wrap = rc.cfg, rc.wrap
	}
	c.mu.RUnlock()
	if wrap == nil {
		return nil
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	w := &written{cfg: cfg, wrap: wrap, value: value, labels: PairsOf(acc.GetLabels())}
	if cfg.Fields != nil {
		w.fields = cfg.Fields(obj)
	}
	c.writtenMu.Lock()
	c.written[key] = append(c.written[key], w)
	c.writtenMu.Unlock()
	return w
}

// forgetPut drops w, a put that failed or whose outcome is unknown (its event, if
// any, is then decoded as anyone else's).
func (c *Cache) forgetPut(key string, w *written) {
	if w == nil {
		return
	}
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	pending := c.written[key]
	if i := slices.Index(pending, w); i >= 0 {
		c.setWritten(key, slices.Delete(pending, i, i+1))
	}
}

// takeWritten returns the record of this server's put at key if value is what it
// put, and forgets it with every earlier one (their events, which come in order,
// have passed). A put of other bytes leaves the records: it is an earlier change
// still on its way, and this server's own puts follow it. Several may wait at once:
// a create and the update a client sends as soon as it is answered.
func (c *Cache) takeWritten(key string, value []byte) *written {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	pending := c.written[key]
	for i, w := range pending {
		if bytes.Equal(w.value, value) {
			c.setWritten(key, slices.Delete(pending, 0, i+1))
			return w
		}
	}
	return nil
}

// setWritten keeps pending as the puts waiting at key (writtenMu held).
func (c *Cache) setWritten(key string, pending []*written) {
	if len(pending) == 0 {
		delete(c.written, key)
	} else {
		c.written[key] = pending
	}
}

// forgetAllWritten drops every record: after a reload the cache no longer waits for
// their events, some of which it read with the rest instead.
func (c *Cache) forgetAllWritten() {
	c.writtenMu.Lock()
	clear(c.written)
	c.writtenMu.Unlock()
}

// entry is the cache entry of w's value as the version at rev, made without decoding:
// the stored message with its resourceVersion set, wrapped as cfg.Protobuf wraps it.
// The writer and the cache both ask for it, in either order (the put's event can be
// back before the writer has its answer): the first call makes it and later calls
// for the same rev return that entry, so the create's response and the cache share
// one. It is nil if the value is not of the shape that allows it.
func (w *written) entry(key string, rev int64) *Entry {
	if e := w.built.Load(); e != nil && e.RV == rev {
		return e
	}
	data, ok := w.wrap.withResourceVersion(w.value[len(protoMagic):], rev)
	if !ok {
		return nil
	}
	e := &Entry{Key: key, Labels: w.labels, Fields: w.fields, RV: rev, cfg: w.cfg}
	e.encoded[ProtobufSlot].Store(&data)
	if !w.built.CompareAndSwap(nil, e) {
		if first := w.built.Load(); first.RV == rev {
			return first
		}
	}
	return e
}

// builtEntry is the entry of w's value as the version at rev, the revision its put
// succeeded at (see entry); nil for no record (w nil) or a value of another shape.
func (w *written) builtEntry(key string, rev int64) *Entry {
	if w == nil {
		return nil
	}
	return w.entry(key, rev)
}

// unknownWrap is how a resource's Protobuf encoder wraps an object's message: head
// (the protobuf prefix, then a runtime.Unknown's type meta and the tag of its raw
// field), the message's length and the message, then tail (the Unknown's remaining
// fields). It depends on the kind only, so it is learned once from a probe.
type unknownWrap struct {
	head, tail []byte
}

// wrapOf learns how cfg.Protobuf wraps a message, by encoding an object of cfg's type
// and finding the object's own message in it. It is nil for a resource without a
// protobuf form, or whose encoder does not wrap the message as it is.
func wrapOf(cfg *ResourceConfig) *unknownWrap {
	if cfg.Protobuf == nil || cfg.New == nil {
		return nil
	}
	probe := cfg.New()
	pm, ok := probe.(protoMessage)
	if !ok || hasBytesMap(reflect.TypeOf(probe), map[reflect.Type]bool{}) {
		return nil
	}
	acc, err := meta.Accessor(probe)
	if err != nil {
		return nil
	}
	probe.GetObjectKind().SetGroupVersionKind(cfg.Kind)
	acc.SetName("probe")
	acc.SetResourceVersion("1")
	msg, err := pm.Marshal()
	if err != nil {
		return nil
	}
	data, err := cfg.Protobuf(probe)
	if err != nil || !bytes.HasPrefix(data, ProtobufPrefix) {
		return nil
	}
	for at := len(ProtobufPrefix); at < len(data); {
		num, typ, n := protowire.ConsumeTag(data[at:])
		if n < 0 || typ != protowire.BytesType {
			return nil
		}
		field, m := protowire.ConsumeBytes(data[at+n:])
		if m < 0 {
			return nil
		}
		if num == 2 {
			if !bytes.Equal(field, msg) {
				return nil
			}
			return &unknownWrap{head: bytes.Clone(data[:at+n]), tail: bytes.Clone(data[at+n+m:])}
		}
		at += n + m
	}
	return nil
}

// withResourceVersion wraps msg, an object's stored message, as the encoder would
// wrap the same object with metadata.resourceVersion rev. The stored message has
// its resourceVersion empty (the store clears it; etcd keeps the revision) and, as
// the generated marshallers write every string, present: field 6 of the metadata,
// itself field 1 of the object, each once. Anything else is refused (false).
func (u *unknownWrap) withResourceVersion(msg []byte, rev int64) ([]byte, bool) {
	metaLenAt, metaStart, metaEnd, ok := onlyField(msg, 1)
	if !ok {
		return nil, false
	}
	metaMsg := msg[metaStart:metaEnd]
	rvLenAt, rvStart, rvEnd, ok := onlyField(metaMsg, 6)
	if !ok || rvStart != rvEnd {
		return nil, false
	}
	var digits [20]byte
	rv := strconv.AppendInt(digits[:0], rev, 10)
	// The metadata with the digits, and their length (under 128: one byte), in place
	// of the empty value; the object's message with the metadata's new length.
	newMeta := rvLenAt + 1 + len(rv) + len(metaMsg) - rvEnd
	newMsg := metaLenAt + protowire.SizeVarint(uint64(newMeta)) + newMeta + len(msg) - metaEnd
	out := make([]byte, 0, len(u.head)+protowire.SizeVarint(uint64(newMsg))+newMsg+len(u.tail))
	out = append(out, u.head...)
	out = protowire.AppendVarint(out, uint64(newMsg))
	out = append(out, msg[:metaLenAt]...)
	out = protowire.AppendVarint(out, uint64(newMeta))
	out = append(out, metaMsg[:rvLenAt]...)
	out = append(out, byte(len(rv)))
	out = append(out, rv...)
	out = append(out, metaMsg[rvEnd:]...)
	out = append(out, msg[metaEnd:]...)
	out = append(out, u.tail...)
	return out, true
}

// onlyField finds field num, a length-delimited field that msg holds exactly once:
// its length starts at msg[lenAt], its value is msg[start:end]. It is false when msg
// is malformed, or holds the field twice or not at all, or in another wire type.
func onlyField(msg []byte, num protowire.Number) (lenAt, start, end int, ok bool) {
	found := false
	for at := 0; at < len(msg); {
		n, typ, tagLen := protowire.ConsumeTag(msg[at:])
		if tagLen < 0 {
			return 0, 0, 0, false
		}
		valueLen := protowire.ConsumeFieldValue(n, typ, msg[at+tagLen:])
		if valueLen < 0 {
			return 0, 0, 0, false
		}
		if n == num {
			if found || typ != protowire.BytesType {
				return 0, 0, 0, false
			}
			value, _ := protowire.ConsumeBytes(msg[at+tagLen:])
			found = true
			lenAt = at + tagLen
			end = lenAt + valueLen
			start = end - len(value)
		}
		at += tagLen + valueLen
	}
	return lenAt, start, end, found
}

// hasBytesMap reports whether values of type t can hold a map of byte strings
// (ConfigMap's binaryData, Secret's data). Such a type does not come back from its
// stored encoding as it went in: a nil value is stored without its field and decodes
// as empty bytes, which the encoder then writes. What the cache holds is the decoded
// object's encoding, so these types' puts are decoded as before. seen breaks cycles.
func hasBytesMap(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Map:
		if e := t.Elem(); e.Kind() == reflect.Slice && e.Elem().Kind() == reflect.Uint8 {
			return true
		}
		return hasBytesMap(t.Key(), seen) || hasBytesMap(t.Elem(), seen)
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return hasBytesMap(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasBytesMap(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// latestCopy returns a private copy of the cached object at key and its revision, for
// an update to start from without reading etcd, or nil when the cache has no copy it
// can vouch for: the resource is not cached as protobuf, the key is not there, or
// this server has a put at key whose event has not come back (the copy is then known
// to be stale, and a writer repeating itself would always conflict). Any copy may
// still be stale; the update's compare-and-put catches that.
func (c *Cache) latestCopy(key string, newObj func() runtime.Object) (runtime.Object, int64) {
	if c == nil {
		return nil, 0
	}
	c.writtenMu.Lock()
	pending := len(c.written[key]) > 0
	c.writtenMu.Unlock()
	if pending {
		return nil, 0
	}
	e, _, err := c.Get(segmentOf(key), key)
	if err != nil || e == nil || e.object != nil {
		return nil, 0
	}
	obj, err := e.decode() // the caller's own
	if err != nil || reflect.TypeOf(obj) != reflect.TypeOf(newObj()) {
		return nil, 0
	}
	return obj, e.RV
}

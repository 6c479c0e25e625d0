package storage

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Prefix is where every API object lives in etcd.
const Prefix = "/registry/"

// ResourceConfig tells the cache how to hold one resource's objects.
type ResourceConfig struct {
	// Segment is the key segment after Prefix ("pods", "deployments.apps").
	Segment string
	// Kind stamps apiVersion and kind on cached objects.
	Kind schema.GroupVersionKind
	New  func() runtime.Object
	// Fields computes the field-selector fields of an object (metadata.* included),
	// sorted (Pairs.Sorted).
	Fields func(obj runtime.Object) Pairs
	// Protobuf, when set, is the protobuf encoding a response or watch event carries
	// for an object (ProtobufPrefix, then a runtime.Unknown): an entry of a type that
	// has one then keeps only that encoding, a third of the decoded object's memory,
	// and decodes its object again when asked. Lists and gets in protobuf, and every
	// watch in protobuf, send it as it is.
	Protobuf func(runtime.Object) ([]byte, error)
	// KeepDecoded makes an entry that keeps only its protobuf encoding keep its object
	// too, once decoded: for the few small objects that admission reads on every
	// write (a pod's namespace and service account), which would otherwise be decoded
	// again for every pod created.
	KeepDecoded bool
	// IndexedField is a field (of Fields) that many watches each select one value of,
	// as every kubelet watches the pods whose spec.nodeName is its node: a watcher
	// asking for one value (WatchOptions.Indexed) is handed only the events of objects
	// that have that value, or had it before the change, instead of every event.
	IndexedField string
}

// Entry is one cached object version. Entries are immutable: readers share them and
// must copy what Object returns before changing it.
type Entry struct {
	Key    string
	Labels Pairs
	Fields Pairs
	RV     int64
	// object is the decoded object of an entry kept decoded (a type without a
	// protobuf form, or a cache without ResourceConfig.Protobuf); nil when the entry
	// keeps only its protobuf encoding (encoded[ProtobufSlot]).
	object runtime.Object
	// decoded is the object decoded from the encoding, kept where cfg.KeepDecoded.
	decoded atomic.Pointer[decodedObject]
	cfg     *ResourceConfig
	// encoded caches the object's serialized forms (see Encoded), so a change sent to
	// a thousand watchers is encoded once per format.
	encoded [2]atomic.Pointer[[]byte]
	// size is the bytes of the object's etcd value, for the cache's Stats (0 for an
	// entry outside the cache).
	size int
}

// DecodedEntry is an entry holding obj as it is, outside any cache: an object read
// from etcd, tested with the same selectors as cached entries.
func DecodedEntry(key string, obj runtime.Object, l labels.Set, f Pairs) *Entry {
	return &Entry{Key: key, Labels: PairsOf(l), Fields: f, object: obj}
}

// JSONSlot and ProtobufSlot are the format slots of Encoded.
const (
	JSONSlot     = 0
	ProtobufSlot = 1
)

// ProtobufPrefix starts every protobuf-encoded object (runtime.Unknown follows).
var ProtobufPrefix = []byte("k8s\x00")

// Object returns the entry's object. An entry that keeps only its encoding decodes it
// afresh on every call; either way the caller must not change what it gets without
// copying it first, as it may be shared.
func (e *Entry) Object() (runtime.Object, error) {
	if e.object != nil {
		return e.object, nil
	}
	if e.cfg == nil || !e.cfg.KeepDecoded {
		return e.decode()
	}
	if d := e.decoded.Load(); d != nil {
		return d.obj, nil
	}
	obj, err := e.decode()
	if err != nil {
		return nil, err
	}
	e.decoded.Store(&decodedObject{obj})
	return obj, nil
}

type decodedObject struct{ obj runtime.Object }

// decode decodes the entry's protobuf encoding into a new object.
func (e *Entry) decode() (runtime.Object, error) {
	p := e.encoded[ProtobufSlot].Load()
	if p == nil {
		return nil, fmt.Errorf("cache entry %s holds neither its object nor its encoding", e.Key)
	}
	raw, ok := UnknownRaw(*p)
	if !ok {
		return nil, fmt.Errorf("cache entry %s: malformed protobuf encoding", e.Key)
	}
	obj := e.cfg.New()
	if err := obj.(protoMessage).Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("decoding cache entry %s: %w", e.Key, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(e.cfg.Kind)
	return obj, nil
}

// Encoded returns the entry's object encoded in format slot i (JSONSlot or
// ProtobufSlot), calling encode the first time only.
func (e *Entry) Encoded(i int, encode func(runtime.Object) ([]byte, error)) ([]byte, error) {
	if p := e.encoded[i].Load(); p != nil {
		return *p, nil
	}
	obj, err := e.Object()
	if err != nil {
		return nil, err
	}
	data, err := encode(obj)
	if err != nil {
		return nil, err
	}
	return e.keep(i, data), nil
}

// keep stores data as the entry's encoding in slot i and returns what it stored: kept
// as long as the entry, so not with the slack of the buffer it was encoded in.
func (e *Entry) keep(i int, data []byte) []byte {
	if cap(data) > len(data)+len(data)/8 {
		data = bytes.Clone(data)
	}
	e.encoded[i].Store(&data)
	return data
}

// HasProtobuf reports whether the entry's object has a protobuf form.
func (e *Entry) HasProtobuf() bool {
	if e.object == nil {
		return true
	}
	_, ok := e.object.(protoMessage)
	return ok
}

// UnknownRaw returns the object's own message inside a ProtobufPrefix encoding.
func UnknownRaw(data []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(data, ProtobufPrefix)
	for ok && len(rest) > 0 {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || typ != protowire.BytesType {
			return nil, false
		}
		rest = rest[n:]
		field, m := protowire.ConsumeBytes(rest)
		if m < 0 {
			return nil, false
		}
		if num == 2 {
			return field, true
		}
		rest = rest[m:]
	}
	return nil, false
}

// Event is a change to one object. Prev is the entry it replaced (nil for ADDED).
type Event struct {
	Type  watch.EventType
	Entry *Entry
	Prev  *Entry
	RV    int64
}

// historySize is how many events each resource keeps for watches that start in the
// past; a watch from before the oldest kept event gets 410 Gone.
const historySize = 4096

type resourceCache struct {
	// cfg is replaced, never changed: entries keep the one they were made with.
	cfg *ResourceConfig
	// wrap is how cfg.Protobuf wraps a message (nil: not known), replaced with cfg.
	wrap  *unknownWrap
	items *btree.BTreeG[*Entry]
	// bytes is the sum of the items' sizes.
	bytes    int64
	history  []*Event // ring
	histNext int
	histLen  int
	// startRV: every event after it is in history.
	startRV  int64
	watchers map[*Watcher]struct{}
	// unindexed are the watchers that see every event; byIndex the others, by the
	// value of cfg.IndexedField they select. Both are subsets of watchers.
	unindexed map[*Watcher]struct{}
	byIndex   map[string]map[*Watcher]struct{}
}

// newResourceCache is an empty cache of one resource.
func newResourceCache(cfg *ResourceConfig) *resourceCache {
	return &resourceCache{
		cfg:       cfg,
		wrap:      wrapOf(cfg),
		items:     btree.NewG(32, func(a, b *Entry) bool { return a.Key < b.Key }),
		history:   make([]*Event, historySize),
		watchers:  map[*Watcher]struct{}{},
		unindexed: map[*Watcher]struct{}{},
		byIndex:   map[string]map[*Watcher]struct{}{},
	}
}

// insert puts an entry in the tree, replacing the key's previous one, and keeps the
// resource's byte count.
func (rc *resourceCache) insert(e *Entry) {
	if prev, ok := rc.items.ReplaceOrInsert(e); ok {
		rc.bytes -= int64(prev.size)
	}
	rc.bytes += int64(e.size)
}

// add registers a watcher for the events to come.
func (rc *resourceCache) add(w *Watcher) {
	rc.watchers[w] = struct{}{}
	if !w.opts.Indexed || rc.cfg.IndexedField == "" {
		rc.unindexed[w] = struct{}{}
		return
	}
	set := rc.byIndex[w.opts.IndexValue]
	if set == nil {
		set = map[*Watcher]struct{}{}
		rc.byIndex[w.opts.IndexValue] = set
	}
	set[w] = struct{}{}
}

// remove forgets a watcher.
func (rc *resourceCache) remove(w *Watcher) {
	delete(rc.watchers, w)
	delete(rc.unindexed, w)
	if set := rc.byIndex[w.opts.IndexValue]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(rc.byIndex, w.opts.IndexValue)
		}
	}
}

// dispatch hands a change to the watchers that may see it: those that see every
// event, and those selecting the indexed field's value before or after the change.
func (rc *resourceCache) dispatch(ev *Event) {
	for w := range rc.unindexed {
		w.offer(ev)
	}
	if len(rc.byIndex) == 0 {
		return
	}
	value := ev.Entry.Fields.Get(rc.cfg.IndexedField)
	for w := range rc.byIndex[value] {
		w.offer(ev)
	}
	if ev.Prev != nil {
		if before := ev.Prev.Fields.Get(rc.cfg.IndexedField); before != value {
			for w := range rc.byIndex[before] {
				w.offer(ev)
			}
		}
	}
}

// Cache serves every registered resource from memory, kept current by one etcd watch.
type Cache struct {
	client    *clientv3.Client
	mu        sync.RWMutex
	rv        int64
	rvChanged *sync.Cond
	resources map[string]*resourceCache
	ready     chan struct{}
	// stopped is set, under mu, when Run has ended and open watches were stopped.
	stopped bool
	log     *slog.Logger
	// written holds, by key, this server's puts whose events have not come back yet
	// (see expectPut); writtenMu guards it.
	writtenMu sync.Mutex
	written   map[string][]*written
	// fromPuts counts the entries built from those puts' records, not decoded.
	fromPuts atomic.Int64
}

// NewCache returns a cache for the given resources; Run fills and follows it.
func NewCache(client *clientv3.Client, resources []ResourceConfig, log *slog.Logger) *Cache {
	c := &Cache{client: client, resources: map[string]*resourceCache{}, ready: make(chan struct{}), log: log, written: map[string][]*written{}}
	c.rvChanged = sync.NewCond(c.mu.RLocker())
	for _, rc := range resources {
		c.resources[rc.Segment] = newResourceCache(&rc)
	}
	return c
}

// Ready is closed once the initial list is loaded.
func (c *Cache) Ready() <-chan struct{} { return c.ready }

// Revision is the latest etcd revision the cache has applied.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

func segmentOf(key string) string {
	rest := strings.TrimPrefix(key, Prefix)
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// decodeEntry is the entry of cfg's cache for the stored value of key at rev.
func decodeEntry(cfg *ResourceConfig, key string, value []byte, rev int64) (*Entry, error) {
	obj := cfg.New()
	if err := Decode(value, obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", key, err)
	}
	return NewEntry(cfg, key, obj, rev)
}

// NewEntry is the entry a cache of cfg makes for obj as the version of key at rev. It
// may change obj (its kind and resourceVersion are set), and keeps it or drops it.
func NewEntry(cfg *ResourceConfig, key string, obj runtime.Object, rev int64) (*Entry, error) {
	// A custom resource keeps the version it was stored in (an older storage version
	// is converted when it is read); typed objects are stamped with their kind.
	if _, ok := obj.(runtime.Unstructured); !ok || obj.GetObjectKind().GroupVersionKind().Kind == "" {
		obj.GetObjectKind().SetGroupVersionKind(cfg.Kind)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	e := &Entry{Key: key, Labels: PairsOf(acc.GetLabels()), RV: rev, cfg: cfg}
	if cfg.Fields != nil {
		e.Fields = cfg.Fields(obj)
	}
	if _, ok := obj.(protoMessage); ok && cfg.Protobuf != nil {
		// An object the encoder refuses is kept decoded rather than lost from the
		// cache; responses then report the encoder's error when they need it.
		if data, err := cfg.Protobuf(obj); err == nil {
			e.keep(ProtobufSlot, data)
			return e, nil
		}
	}
	e.object = obj
	return e, nil
}

// deletedEntry is prev's object reported at the deletion's revision, as upstream does.
func (c *Cache) deletedEntry(rc *resourceCache, prev *Entry, rev int64) (*Entry, error) {
	// NewEntry changes the object (its resourceVersion): a copy of prev's own.
	var obj runtime.Object
	var err error
	if prev.object != nil {
		obj = prev.object.DeepCopyObject()
	} else if obj, err = prev.decode(); err != nil {
		return nil, err
	}
	return NewEntry(rc.cfg, prev.Key, obj, rev)
}

// Run loads every object and follows etcd until ctx ends. When etcd compacts past the
// watch (after a long disconnect), it reloads and ends every open watch so clients
// start again from a fresh list.
func (c *Cache) Run(ctx context.Context) error {
	go c.bookmarkLoop(ctx)
	for ctx.Err() == nil {
		rev, err := c.load(ctx)
		if err != nil {
			c.log.Error("watch cache: initial list failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		select {
		case <-c.ready:
		default:
			close(c.ready)
		}
		if err := c.follow(ctx, rev); err != nil && ctx.Err() == nil {
			c.log.Warn("watch cache: etcd watch ended, reloading", "err", err)
		}
	}
	return ctx.Err()
}

// load replaces the cache content with a fresh read of etcd and returns its revision.
func (c *Cache) load(ctx context.Context) (int64, error) {
	var rev int64
	loaded := map[string][]*Entry{}
	start, end := Prefix, clientv3.GetPrefixRangeEnd(Prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(5000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.client.Get(ctx, start, opts...)
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			c.mu.RLock()
			rc := c.resources[segmentOf(key)]
			c.mu.RUnlock()
			if rc == nil {
				continue
			}
			e, err := decodeEntry(rc.cfg, key, kv.Value, kv.ModRevision)
			if err != nil {
				c.log.Error("watch cache: skipping undecodable object", "key", key, "err", err)
				continue
			}
			e.size = len(kv.Value)
			loaded[rc.cfg.Segment] = append(loaded[rc.cfg.Segment], e)
		}
		if !resp.More {
			break
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	c.mu.Lock()
	for seg, rc := range c.resources {
		rc.items.Clear(false)
		rc.bytes = 0
		for _, e := range loaded[seg] {
			rc.insert(e)
		}
		rc.histLen, rc.histNext, rc.startRV = 0, 0, rev
		for w := range rc.watchers {
			w.stop(fmt.Errorf("the watch cache was reloaded"))
		}
	}
	c.rv = rev
	c.rvChanged.Broadcast()
	c.mu.Unlock()
	c.forgetAllWritten()
	c.prefillHistory(ctx, rev)
	return rev, nil
}

// prefillHistory loads the changes that led up to rev from etcd's own history, so a
// client that watched a previous apiserver process (or this one before a reload) can
// resume from its last resource version instead of listing again. Whatever etcd has
// compacted away is simply not there; watches from before it get 410 Gone.
func (c *Cache) prefillHistory(ctx context.Context, rev int64) {
	if rev <= 1 {
		return // a new etcd: no history
	}
	from := rev - historySize + 1
	if from < 1 {
		from = 1
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	wch := c.client.Watch(wctx, Prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	var events []*clientv3.Event
	complete := false
	for resp := range wch {
		if resp.Err() != nil || resp.CompactRevision != 0 {
			return
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > rev {
				continue
			}
			events = append(events, ev)
		}
		if resp.Header.Revision >= rev && (len(resp.Events) == 0 || resp.Events[len(resp.Events)-1].Kv.ModRevision >= rev) {
			complete = true
			break
		}
		if len(events) > 0 && events[len(events)-1].Kv.ModRevision >= rev {
			complete = true
			break
		}
	}
	if !complete {
		// Cut short (the time limit): part of the history would pass for all of it, and
		// a watch resuming inside the gap would miss events. Without it such a watch is
		// told 410 Gone and lists again.
		c.log.Warn("watch cache: history before the restart not loaded in time", "revision", rev)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rv != rev {
		return // the cache moved on meanwhile; keep what it has
	}
	perResource := map[*resourceCache][]*Event{}
	for _, ev := range events {
		key := string(ev.Kv.Key)
		rc := c.resources[segmentOf(key)]
		if rc == nil {
			continue
		}
		var prev *Entry
		if ev.PrevKv != nil {
			prev, _ = decodeEntry(rc.cfg, key, ev.PrevKv.Value, ev.PrevKv.ModRevision)
		}
		var event *Event
		if ev.Type == clientv3.EventTypePut {
			e, err := decodeEntry(rc.cfg, key, ev.Kv.Value, ev.Kv.ModRevision)
			if err != nil {
				continue
			}
			typ := watch.Modified
			if prev == nil {
				typ = watch.Added
			}
			event = &Event{Type: typ, Entry: e, Prev: prev, RV: ev.Kv.ModRevision}
		} else {
			if prev == nil {
				continue
			}
			e, err := c.deletedEntry(rc, prev, ev.Kv.ModRevision)
			if err != nil {
				continue
			}
			event = &Event{Type: watch.Deleted, Entry: e, Prev: prev, RV: ev.Kv.ModRevision}
		}
		perResource[rc] = append(perResource[rc], event)
	}
	for _, rc := range c.resources {
		evs := perResource[rc]
		if len(evs) > len(rc.history) {
			evs = evs[len(evs)-len(rc.history):]
		}
		for i, ev := range evs {
			rc.history[i] = ev
		}
		rc.histLen, rc.histNext = len(evs), len(evs)%len(rc.history)
		// Everything after from-1 is known, for every resource.
		rc.startRV = from - 1
		if len(perResource[rc]) > len(rc.history) {
			rc.startRV = evs[0].RV - 1
		}
	}
}

func (c *Cache) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.client.Watch(wctx, Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.IsProgressNotify() {
			c.advance(resp.Header.Revision)
			continue
		}
		c.apply(resp.Events)
	}
	return fmt.Errorf("watch channel closed")
}

func (c *Cache) advance(rev int64) {
	c.mu.Lock()
	if rev > c.rv {
		c.rv = rev
		c.rvChanged.Broadcast()
	}
	c.mu.Unlock()
}

// builtEntry is a put's entry, decoded and encoded with the settings cfg of its
// resource's cache (nil: not built).
type builtEntry struct {
	cfg   *ResourceConfig
	entry *Entry
	err   error
}

// apply folds a batch of etcd events into the cache and hands them to watchers.
func (c *Cache) apply(events []*clientv3.Event) {
	// Decoding and encoding the objects is most of the work: it is done before the
	// write lock is taken, so that reads of the cache wait only for the trees' updates.
	built := make([]builtEntry, len(events))
	c.mu.RLock()
	for i, ev := range events {
		if ev.Type == clientv3.EventTypePut {
			if rc := c.resources[segmentOf(string(ev.Kv.Key))]; rc != nil {
				built[i].cfg = rc.cfg
			}
		}
	}
	c.mu.RUnlock()
	for i, ev := range events {
		if b := &built[i]; b.cfg != nil {
			key := string(ev.Kv.Key)
			if w := c.takeWritten(key, ev.Kv.Value); w != nil && w.cfg == b.cfg {
				if b.entry = w.entry(key, ev.Kv.ModRevision); b.entry != nil {
					c.fromPuts.Add(1)
					continue
				}
			}
			b.entry, b.err = decodeEntry(b.cfg, key, ev.Kv.Value, ev.Kv.ModRevision)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ev := range events {
		key := string(ev.Kv.Key)
		rev := ev.Kv.ModRevision
		if rc := c.resources[segmentOf(key)]; rc != nil {
			// A cache replaced meanwhile (a CRD changed) has settings of its own.
			b := built[i]
			if ev.Type == clientv3.EventTypePut && b.cfg != rc.cfg {
				b = builtEntry{cfg: rc.cfg}
				b.entry, b.err = decodeEntry(rc.cfg, key, ev.Kv.Value, rev)
			}
			c.applyOne(rc, ev, key, rev, b)
		}
		if rev > c.rv {
			c.rv = rev
		}
	}
	c.rvChanged.Broadcast()
}

// applyOne folds one event into rc; a put's entry was built beforehand.
func (c *Cache) applyOne(rc *resourceCache, ev *clientv3.Event, key string, rev int64, put builtEntry) {
	prev, _ := rc.items.Get(&Entry{Key: key})
	var event *Event
	switch ev.Type {
	case clientv3.EventTypePut:
		e, err := put.entry, put.err
		if err != nil {
			c.log.Error("watch cache: skipping undecodable object", "key", key, "err", err)
			return
		}
		e.size = len(ev.Kv.Value)
		rc.insert(e)
		typ := watch.Modified
		if prev == nil {
			typ = watch.Added
		}
		event = &Event{Type: typ, Entry: e, Prev: prev, RV: rev}
	case clientv3.EventTypeDelete:
		if prev == nil {
			return
		}
		rc.items.Delete(prev)
		rc.bytes -= int64(prev.size)
		e, err := c.deletedEntry(rc, prev, rev)
		if err != nil {
			return
		}
		event = &Event{Type: watch.Deleted, Entry: e, Prev: prev, RV: rev}
	}
	if rc.histLen == len(rc.history) {
		rc.startRV = rc.history[rc.histNext].RV
	} else {
		rc.histLen++
	}
	rc.history[rc.histNext] = event
	rc.histNext = (rc.histNext + 1) % len(rc.history)
	rc.dispatch(event)
}

// WaitFresh blocks until the cache has applied revision rev, asking etcd for progress
// notifications meanwhile. It fails with ErrTooLargeRV after the timeout.
func (c *Cache) WaitFresh(ctx context.Context, rev int64, timeout time.Duration) error {
	c.mu.RLock()
	fresh := c.rv >= rev
	c.mu.RUnlock()
	if fresh {
		return nil
	}
	deadline := time.Now().Add(timeout)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = c.client.RequestProgress(ctx)
			select {
			case <-done:
				return
			case <-ctx.Done():
				c.rvChanged.Broadcast()
				return
			case <-tick.C:
				c.rvChanged.Broadcast()
			}
		}
	}()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for c.rv < rev {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return keyErr(ErrTooLargeRV, "", fmt.Sprintf("Too large resource version: %d, current: %d", rev, c.rv))
		}
		c.rvChanged.Wait()
	}
	return nil
}

func (c *Cache) resource(segment string) (*resourceCache, error) {
	c.mu.RLock()
	rc := c.resources[segment]
	c.mu.RUnlock()
	if rc == nil {
		return nil, fmt.Errorf("resource %q is not cached", segment)
	}
	return rc, nil
}

// List returns the entries under keyPrefix that match, in key order, and the revision
// they reflect.
func (c *Cache) List(segment, keyPrefix string, match func(*Entry) bool) ([]*Entry, int64, error) {
	rc, err := c.resource(segment)
	if err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	var out []*Entry
	rc.items.AscendGreaterOrEqual(&Entry{Key: keyPrefix}, func(e *Entry) bool {
		if !strings.HasPrefix(e.Key, keyPrefix) {
			return false
		}
		out = append(out, e)
		return true
	})
	rv := c.rv
	c.mu.RUnlock()
	// match runs outside the lock, as a watcher's does (see Watcher.offer).
	if match != nil {
		kept := out[:0]
		for _, e := range out {
			if match(e) {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	return out, rv, nil
}

// Stats are a cached resource's object count and the average size of its objects as
// stored in etcd, in bytes; ok is false for a resource not cached. API Priority and
// Fairness estimates what a list costs from them, as upstream's does from its
// storage's.
func (c *Cache) Stats(segment string) (count int, averageBytes int64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rc := c.resources[segment]
	if rc == nil {
		return 0, 0, false
	}
	if count = rc.items.Len(); count > 0 {
		averageBytes = rc.bytes / int64(count)
	}
	return count, averageBytes, true
}

// Get returns the cached entry at key, or nil.
func (c *Cache) Get(segment, key string) (*Entry, int64, error) {
	rc, err := c.resource(segment)
	if err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, _ := rc.items.Get(&Entry{Key: key})
	return e, c.rv, nil
}

// WatchOptions say where a watch starts and what it sees.
type WatchOptions struct {
	// KeyPrefix limits the watch to keys under it (a namespace, or one object's key).
	KeyPrefix string
	// Match filters objects (label and field selectors); nil matches all.
	Match func(*Entry) bool
	// FromRV: events after this revision are delivered. Zero means "now".
	FromRV int64
	// InitialEvents: begin with an ADDED event for every matching object that exists at
	// the start revision.
	InitialEvents bool
	// InitialEventsEnd: after the initial events, send a bookmark marking their end
	// (the watch-list protocol).
	InitialEventsEnd bool
	// Bookmarks: send periodic bookmarks.
	Bookmarks bool
	// Indexed: Match selects only objects whose ResourceConfig.IndexedField is
	// IndexValue (it may select fewer), so the watcher need not be handed the others.
	Indexed    bool
	IndexValue string
}

// Watch starts a watch. It fails with ErrExpired when FromRV is older than the kept
// history.
func (c *Cache) Watch(segment string, opts WatchOptions) (*Watcher, error) {
	rc, err := c.resource(segment)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		// A watcher added now would never be stopped, and would hold its request, and the
		// server's shutdown, open.
		return nil, keyErr(ErrStopped, opts.KeyPrefix, "")
	}
	w := newWatcher(rc, opts)
	from := opts.FromRV
	if from == 0 {
		from = c.rv
	}
	if opts.InitialEvents {
		// State at the current revision, then changes after it.
		rc.items.AscendGreaterOrEqual(&Entry{Key: opts.KeyPrefix}, func(e *Entry) bool {
			if !strings.HasPrefix(e.Key, opts.KeyPrefix) {
				return false
			}
			// Filtered by Next, outside the lock.
			w.queue = append(w.queue, &Event{Type: watch.Added, Entry: e, RV: e.RV})
			return true
		})
		if opts.InitialEventsEnd {
			w.queue = append(w.queue, &Event{Type: watch.Bookmark, RV: c.rv, Entry: &Entry{}, Prev: initialEventsEndMarker})
		}
		from = c.rv
	} else {
		if from < rc.startRV {
			return nil, keyErr(ErrExpired, opts.KeyPrefix, fmt.Sprintf("too old resource version: %d (%d)", from, rc.startRV))
		}
		for i := 0; i < rc.histLen; i++ {
			ev := rc.history[(rc.histNext-rc.histLen+i+len(rc.history))%len(rc.history)]
			if ev.RV > from {
				w.offer(ev)
			}
		}
	}
	rc.add(w)
	w.signal()
	return w, nil
}

// initialEventsEndMarker tags the bookmark that ends the initial events.
var initialEventsEndMarker = &Entry{Key: "k8s.io/initial-events-end"}

// IsInitialEventsEnd reports whether a bookmark event ends the initial events.
func (e *Event) IsInitialEventsEnd() bool {
	return e.Type == watch.Bookmark && e.Prev == initialEventsEndMarker
}

func (c *Cache) bookmarkLoop(ctx context.Context) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.stopped = true
			for _, rc := range c.resources {
				for w := range rc.watchers {
					w.stop(ctx.Err())
				}
			}
			c.mu.Unlock()
			return
		case <-tick.C:
		}
		c.mu.Lock()
		for _, rc := range c.resources {
			for w := range rc.watchers {
				if w.opts.Bookmarks {
					w.offer(&Event{Type: watch.Bookmark, RV: c.rv, Entry: &Entry{}})
				}
			}
		}
		c.mu.Unlock()
	}
}

// AddResource starts caching a resource while the cache runs (a custom resource whose
// definition was just established): its objects are read from etcd at the revision
// the cache has reached, under the cache's lock, so the events that follow apply on
// top of exactly that state. Adding a resource already cached replaces its settings
// and keeps its objects.
func (c *Cache) AddResource(ctx context.Context, cfg ResourceConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := c.resources[cfg.Segment]; rc != nil {
		rc.cfg, rc.wrap = &cfg, wrapOf(&cfg)
		return nil
	}
	rc := newResourceCache(&cfg)
	rc.startRV = c.rv
	if c.rv > 0 {
		prefix := Prefix + cfg.Segment + "/"
		start, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
		for {
			resp, err := c.client.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(1000), clientv3.WithRev(c.rv))
			if err != nil {
				return err
			}
			for _, kv := range resp.Kvs {
				e, err := decodeEntry(rc.cfg, string(kv.Key), kv.Value, kv.ModRevision)
				if err != nil {
					c.log.Error("watch cache: skipping undecodable object", "key", string(kv.Key), "err", err)
					continue
				}
				e.size = len(kv.Value)
				rc.insert(e)
			}
			if !resp.More {
				break
			}
			start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	c.resources[cfg.Segment] = rc
	return nil
}

// RemoveResource stops caching a resource; its open watches end.
func (c *Cache) RemoveResource(segment string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rc := c.resources[segment]
	if rc == nil {
		return
	}
	for w := range rc.watchers {
		w.stop(nil)
	}
	delete(c.resources, segment)
}

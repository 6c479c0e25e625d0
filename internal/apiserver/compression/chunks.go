package compression

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Items is a list's items as a Chunks cache writes them.
type Items interface {
	Len() int
	// ID identifies item i's bytes: the same key and revision frame the same bytes.
	// A revision of 0 is unknown: such an item is never cached.
	ID(i int) (key string, rev int64)
	// Append appends item i's bytes, as they appear at position i of the body, to dst.
	Append(dst []byte, i int) []byte
}

// Chunks keeps a list's items compressed in runs (chunks), so the list sent again, or
// another list sharing runs of its items, is written mostly by copying segments. A
// chunk is the items from a start item to a boundary that depends only on the items
// themselves (a key whose hash ends a chunk once it holds enough bytes), so a changed
// item invalidates its own chunk and a list's other chunks are found again. One Chunks
// serves one resource in one format: an item's bytes depend on both.
type Chunks struct {
	seed   maphash.Seed
	mu     sync.Mutex
	chunks map[chunkKey]*chunk
	lists  uint64 // lists written, the clock chunks' last use is kept in
	bytes  int    // the kept segments' bytes
	// idle empties the cache once no list was written for idleAfter: a resource
	// listed once, or rarely, would otherwise keep its chunks until forgetAfter more
	// lists, possibly for the server's life.
	idle      *time.Timer
	idleAfter time.Duration
}

// NewChunks returns an empty cache.
func NewChunks() *Chunks {
	return &Chunks{seed: maphash.MakeSeed(), chunks: map[chunkKey]*chunk{}, idleAfter: forgetIdle}
}

// chunkKey names a chunk by its first item and the item before it: a chunk is
// compressed with that item's bytes as its history (deflate refers back to it, and
// a chunk compresses nearly as well as the same bytes in one stream), so it can only
// follow the same item. The first item of a list (no item before it) may also be
// framed differently, without a separator.
type chunkKey struct {
	key, prevKey string
	rev, prevRev int64
}

type chunk struct {
	keys []string
	revs []int64
	seg  Segment
	used atomic.Uint64
}

const (
	// minChunk is the fewest bytes before a key's hash may end a chunk: each chunk
	// costs its own block headers and compressing the item before it again.
	minChunk = 32 << 10
	// maxChunk ends a chunk whatever the keys (large objects).
	maxChunk = 128 << 10
	// endsOneIn: past minChunk, one key in this many ends a chunk.
	endsOneIn = 8
	// forgetAfter is how many lists a chunk survives unused.
	forgetAfter = 64
	// boundSlack is what the cache may hold beyond twice the last list's chunks.
	boundSlack = 1 << 20
	// forgetIdle is how long the cache outlives the last list written from it. Lists
	// further apart than this cost compressing their items again (~100 ms of CPU for
	// 10,000 pods), which the memory is not worth.
	forgetIdle = 5 * time.Minute
)

// Write writes items to s: chunks found in the cache as their segments, the others
// compressed, then kept.
func (c *Chunks) Write(s *Stream, items Items) error {
	n := items.Len()
	clock := c.tick()
	var (
		buf  []byte
		b    segmentBuilder
		used int // bytes of the segments this list is written from
	)
	defer func() { c.bound(clock, used) }()
	for i := 0; i < n; {
		key, rev := items.ID(i)
		ck := chunkKey{key: key, rev: rev}
		if i > 0 {
			ck.prevKey, ck.prevRev = items.ID(i - 1)
		}
		if rev != 0 && (i == 0 || ck.prevRev != 0) {
			if ch := c.lookup(ck); ch != nil && ch.matches(items, i) {
				ch.used.Store(clock)
				used += len(ch.seg.Data)
				if err := s.WriteSegment(ch.seg); err != nil {
					return err
				}
				i += len(ch.keys)
				continue
			}
		}
		// Compress the chunk starting at i, after the item before it.
		ch := &chunk{}
		cacheable := i == 0 || ck.prevRev != 0
		if i > 0 {
			buf = items.Append(buf[:0], i-1)
			b.history(buf)
		}
		size := 0
		for j := i; j < n; j++ {
			k, r := items.ID(j)
			if r == 0 {
				cacheable = false
			}
			buf = items.Append(buf[:0], j)
			b.Write(buf)
			size += len(buf)
			ch.keys = append(ch.keys, k)
			ch.revs = append(ch.revs, r)
			if size >= maxChunk || size >= minChunk && maphash.String(c.seed, k)%endsOneIn == 0 {
				break
			}
		}
		seg, err := b.Segment()
		if err != nil {
			return err
		}
		ch.seg = seg
		if cacheable {
			ch.used.Store(clock)
			c.keep(ck, ch)
			used += len(seg.Data)
		}
		if err := s.WriteSegment(seg); err != nil {
			return err
		}
		i += len(ch.keys)
	}
	return nil
}

// matches reports whether the chunk holds the items from i on.
func (ch *chunk) matches(items Items, i int) bool {
	if i+len(ch.keys) > items.Len() {
		return false
	}
	for j := range ch.keys {
		k, r := items.ID(i + j)
		if r != ch.revs[j] || k != ch.keys[j] {
			return false
		}
	}
	return true
}

func (c *Chunks) lookup(k chunkKey) *chunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chunks[k]
}

func (c *Chunks) keep(k chunkKey, ch *chunk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.chunks[k]; old != nil {
		c.bytes -= len(old.seg.Data)
	}
	c.chunks[k] = ch
	c.bytes += len(ch.seg.Data)
}

// bound drops every chunk the list written at clock did not use when the cache holds
// more than twice what that list used (and more than boundSlack): items that change
// between lists leave chunks behind under keys no list finds again, which would
// otherwise pile up until forgetAfter lists passed.
func (c *Chunks) bound(clock uint64, used int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes <= 2*used+boundSlack {
		return
	}
	c.dropLocked(func(ch *chunk) bool { return ch.used.Load() < clock })
}

// dropLocked deletes the chunks drop says to.
func (c *Chunks) dropLocked(drop func(*chunk) bool) {
	for k, ch := range c.chunks {
		if drop(ch) {
			delete(c.chunks, k)
			c.bytes -= len(ch.seg.Data)
		}
	}
}

// tick counts a list and, every forgetAfter lists, drops the chunks no list used in
// the last forgetAfter (items changed or deleted, lists no longer asked for).
func (c *Chunks) tick() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	if c.lists%forgetAfter == 0 {
		c.dropLocked(func(ch *chunk) bool { return ch.used.Load()+forgetAfter < c.lists })
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(c.idleAfter, c.forgetIdle)
	} else {
		c.idle.Reset(c.idleAfter)
	}
	return c.lists
}

// forgetIdle drops every chunk: no list was written for idleAfter. A list being
// written meanwhile keeps the chunks it holds and adds its new ones as usual.
func (c *Chunks) forgetIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(func(*chunk) bool { return true })
}

// Size is the bytes the cache's segments hold and how many chunks there are.
func (c *Chunks) Size() (bytes, chunks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, len(c.chunks)
}

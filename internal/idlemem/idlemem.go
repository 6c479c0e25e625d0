// Package idlemem returns a long-running server's freed heap memory to the operating
// system when the server goes quiet after a burst of work, and, the first time it is
// quiet, the pages of its executable that start-up faulted in (exe.go).
//
// Go's runtime keeps the memory a burst freed until the heap next grows into it: the
// background scavenger returns only what lies beyond about 1.1 times the next GC's
// goal, which at the default GOGC is twice the live heap. An apiserver holding 10,000
// pods (~100 MiB live) therefore stays at ~220 MiB of anonymous memory after a few
// large lists, for as long as it stays idle. Here a server that has stopped
// allocating, and holds much more than its live heap, runs one GC and hands the free
// spans back (debug.FreeOSMemory). It costs a GC cycle at a moment the process had
// nothing else to do, and at most one per half a live heap's worth of allocation.
package idlemem

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"mizzen/internal/runtimestats"
)

// Interval is how often Run looks at the heap: a server is quiet when it allocated
// less than quietBytes in one interval, so memory goes back one to two intervals
// after a burst ends.
const Interval = 500 * time.Millisecond

const (
	// quietBytes allocated in one Interval still count as quiet: an idle apiserver
	// renews leases, sends bookmarks and serves health checks.
	quietBytes = 2 << 20
	// minExcess is the least memory held beyond the live heap worth a GC to return.
	minExcess = 32 << 20
)

// reading is one look at the heap.
type reading struct {
	// allocs is the bytes allocated since the process started.
	allocs uint64
	// live is the heap the last GC marked live.
	live uint64
	// held is the heap memory a GC and a scavenge could give back beyond the live
	// heap, plus the live heap: objects (live or not yet collected) and free spans
	// not yet returned. The unused parts of spans that hold live objects are left out:
	// no GC returns them.
	held uint64
}

// policy decides, from one reading per interval, when to return memory.
type policy struct {
	seen       bool
	lastAllocs uint64
	// quiet is whether the last reading found the process quiet.
	quiet bool
}

// excess is the memory a GC could give back beyond the live heap that makes one
// worth running: half the live heap, and at least minExcess. A returned heap holds
// about its live heap again, so the process has to allocate this much before the
// next: at most one extra GC per half a live heap allocated, only in the quiet
// moments between bursts, against the one per live heap that GOGC=100 runs anyway.
func excess(live uint64) uint64 { return max(minExcess, live/2) }

// observe takes this interval's reading and says whether to return memory now: the
// process allocated less than quietBytes since the last reading and could give back
// more than excess beyond its live heap.
func (p *policy) observe(r reading) bool {
	first := !p.seen
	p.quiet = !first && r.allocs-p.lastAllocs < quietBytes
	p.seen, p.lastAllocs = true, r.allocs
	return p.quiet && r.held >= r.live+excess(r.live)
}

// didReturn records that memory was returned when allocs bytes had been allocated.
func (p *policy) didReturn(allocs uint64) { p.lastAllocs = allocs }

// newReader reads, in reading's order, the bytes allocated, the live heap, and the
// heap's objects and free spans.
func newReader() *runtimestats.Reader {
	return runtimestats.New(
		"/gc/heap/allocs:bytes",
		"/gc/heap/live:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/free:bytes",
	)
}

func read(r *runtimestats.Reader) reading {
	v := r.Read()
	return reading{allocs: v[0], live: v[1], held: v[2] + v[3]}
}

// Run watches the process's heap every Interval and returns freed memory when the
// process goes quiet holding much more than it uses, until ctx ends; each return is
// logged at debug level. The first time the process is quiet it releases the
// executable's pages (ReleaseExecutable): start it once start-up is over. The heap
// and the executable are the whole process's: run it once per process.
func Run(ctx context.Context, log *slog.Logger) {
	stats := newReader()
	var p policy
	exeReleased := false
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := read(stats)
		returnHeap := p.observe(r)
		if p.quiet && !exeReleased {
			exeReleased = true
			start := time.Now()
			released, err := ReleaseExecutable()
			if err != nil {
				log.Warn("could not release the executable's pages", "err", err)
			} else {
				log.Debug("released the executable's pages start-up faulted in", "mappedMiB", released>>20, "took", time.Since(start))
			}
		}
		if returnHeap {
			start := time.Now()
			debug.FreeOSMemory()
			after := read(stats)
			p.didReturn(after.allocs)
			log.Debug("returned the heap's free memory after a burst", "heldMiB", r.held>>20, "liveMiB", after.live>>20,
				"heldAfterMiB", after.held>>20, "took", time.Since(start))
		}
	}
}

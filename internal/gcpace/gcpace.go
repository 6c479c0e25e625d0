// Package gcpace gives a busy server's garbage collector room to work in. At Go's
// default GOGC=100 a collection starts once the heap has grown by as much again as
// the live heap, so a small heap allocating fast is collected several times a second:
// an apiserver with ~40 MiB live creating pods at 3,000/s ran a 38 ms (CPU) collection
// every quarter second, about a tenth of its CPU. While the process allocates fast,
// Run lets the heap grow by at least Headroom beyond the live heap before the next
// collection; once it slows down, GOGC goes back to what it was. A heap larger than
// Headroom is paced as Go paces it anyway, and the memory a burst leaves behind is
// given back once the process is quiet (package idlemem). The price is memory while
// busy: up to Headroom more than Go's own pacing holds (an apiserver's peak RSS over
// 10,000 creates went from ~120 to ~175 MiB, for a tenth less CPU per create).
//
// An operator's own GOGC is left alone: Run does nothing when the environment sets it.
package gcpace

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"mizzen/internal/runtimestats"
)

const (
	// Interval is how often Run looks at the heap.
	Interval = 500 * time.Millisecond
	// Headroom is the least the heap may grow beyond the live heap, while the process
	// is busy, before a collection starts.
	Headroom = 64 << 20
	// busyBytes allocated in one Interval (32 MB/s) make the process busy: several
	// collections a second at GOGC=100 for a heap of a few tens of MiB.
	busyBytes = 16 << 20
	// maxPercent bounds the GOGC a tiny live heap would ask for.
	maxPercent = 1000
)

// reading is one look at the heap.
type reading struct {
	// allocs is the bytes allocated since the process started.
	allocs uint64
	// live is the heap the last GC marked live.
	live uint64
}

// pacer decides, from one reading per interval, the GOGC to run at.
type pacer struct {
	// base is the GOGC the process started with, kept while it is not busy.
	base int
	// current is the GOGC last set.
	current    int
	seen       bool
	lastAllocs uint64
}

func newPacer(base int) *pacer { return &pacer{base: base, current: base} }

// want is the GOGC for live bytes of live heap while busy: enough for Headroom, never
// below base.
func (p *pacer) want(live uint64) int {
	if live == 0 {
		return p.base
	}
	percent := uint64(Headroom) * 100 / live
	return int(min(max(percent, uint64(p.base)), maxPercent))
}

// observe takes this interval's reading and returns the GOGC to set, and whether it
// differs enough from the current one to be worth setting: back to base as soon as
// the process is not busy, and while busy only when the live heap moved it by more
// than a tenth.
func (p *pacer) observe(r reading) (int, bool) {
	busy := p.seen && r.allocs-p.lastAllocs >= busyBytes
	p.seen, p.lastAllocs = true, r.allocs
	next := p.base
	if busy {
		next = p.want(r.live)
	}
	if next == p.current || busy && p.current != p.base && abs(next-p.current)*10 < p.current {
		return p.current, false
	}
	p.current = next
	return next, true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// newReader reads the bytes allocated, the live heap and GOGC.
func newReader() *runtimestats.Reader {
	return runtimestats.New("/gc/heap/allocs:bytes", "/gc/heap/live:bytes", "/gc/gogc:percent")
}

// read reads the heap, and the GOGC the process runs at.
func read(r *runtimestats.Reader) (reading, int) {
	v := r.Read()
	return reading{allocs: v[0], live: v[1]}, int(v[2])
}

// Run paces the process's collections every Interval until ctx ends, and leaves GOGC
// as it found it. It does nothing when the environment sets GOGC, or when collection
// is off. The heap is the whole process's: run it once per process.
func Run(ctx context.Context, log *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	stats := newReader()
	_, base := read(stats)
	if base <= 0 {
		return
	}
	p := newPacer(base)
	defer func() {
		if p.current != base {
			debug.SetGCPercent(base)
		}
	}()
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, _ := read(stats)
		if percent, ok := p.observe(r); ok {
			debug.SetGCPercent(percent)
			log.Debug("garbage collection paced", "gogc", percent, "liveMiB", r.live>>20)
		}
	}
}

package idlemem

import (
	"runtime"
	"testing"
)

const mib = 1 << 20

// TestPolicy walks one policy through a server's life: start-up, a burst, the quiet
// after it, and what may or may not return memory again.
func TestPolicy(t *testing.T) {
	var p policy
	steps := []struct {
		name string
		r    reading
		want bool
	}{
		{"first reading: nothing to compare with", reading{allocs: 50 * mib, live: 20 * mib, held: 120 * mib}, false},
		{"idle, little to give back beyond the live heap", reading{allocs: 51 * mib, live: 20 * mib, held: 40 * mib}, false},
		{"a burst: allocating fast", reading{allocs: 900 * mib, live: 100 * mib, held: 230 * mib}, false},
		{"still allocating", reading{allocs: 1100 * mib, live: 100 * mib, held: 240 * mib}, false},
		{"quiet, 140 MiB to give back beyond 100 live", reading{allocs: 1101 * mib, live: 100 * mib, held: 240 * mib}, true},
		{"quiet after it, the heap given back", reading{allocs: 1102 * mib, live: 100 * mib, held: 101 * mib}, false},
		{"a small wake-up", reading{allocs: 1140 * mib, live: 100 * mib, held: 140 * mib}, false},
		{"quiet after it, 40 MiB of garbage: less than half the live heap", reading{allocs: 1141 * mib, live: 100 * mib, held: 140 * mib}, false},
		{"another burst", reading{allocs: 1500 * mib, live: 110 * mib, held: 240 * mib}, false},
		{"quiet again after it", reading{allocs: 1501 * mib, live: 110 * mib, held: 240 * mib}, true},
		{"a small heap: 30 MiB beyond 20 live is below minExcess", reading{allocs: 1800 * mib, live: 20 * mib, held: 50 * mib}, false},
		{"quiet with it", reading{allocs: 1801 * mib, live: 20 * mib, held: 50 * mib}, false},
	}
	for _, s := range steps {
		got := p.observe(s.r)
		if got != s.want {
			t.Errorf("%s: observe = %v, want %v", s.name, got, s.want)
		}
		if got {
			p.didReturn(s.r.allocs)
		}
	}
}

// TestRead checks that the metrics Run reads exist in this Go: a name the runtime
// does not know reads as zero, and the policy would never fire.
func TestRead(t *testing.T) {
	runtime.GC() // the live heap is known after a GC
	if r := read(newReader()); r.allocs == 0 || r.live == 0 || r.held == 0 {
		t.Fatalf("reading %+v: a metric is missing", r)
	}
}

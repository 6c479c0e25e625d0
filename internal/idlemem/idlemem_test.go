package idlemem

import (
	"runtime"
	"testing"
	"time"
)

const mib = 1 << 20

// TestPolicy walks one policy through a server's life: start-up, a burst, the quiet
// after it, and what may or may not return memory again.
func TestPolicy(t *testing.T) {
	const ms = time.Millisecond
	var p policy
	steps := []struct {
		name string
		r    reading
		want bool
	}{
		{"first reading: nothing to compare with", reading{allocs: 50 * mib, cpu: 900 * ms, live: 20 * mib, held: 120 * mib}, false},
		{"idle, little to give back beyond the live heap", reading{allocs: 51 * mib, cpu: 905 * ms, live: 20 * mib, held: 30 * mib}, false},
		{"a burst: allocating fast", reading{allocs: 900 * mib, cpu: 1800 * ms, live: 100 * mib, held: 230 * mib}, false},
		{"still allocating", reading{allocs: 1100 * mib, cpu: 2700 * ms, live: 100 * mib, held: 240 * mib}, false},
		{"allocating little but busy, as when writing cached lists", reading{allocs: 1101 * mib, cpu: 3200 * ms, live: 100 * mib, held: 240 * mib}, false},
		{"quiet, 140 MiB to give back beyond 100 live", reading{allocs: 1102 * mib, cpu: 3210 * ms, live: 100 * mib, held: 240 * mib}, true},
		{"quiet after it, the heap given back", reading{allocs: 1103 * mib, cpu: 3300 * ms, live: 100 * mib, held: 101 * mib}, false},
		{"a small wake-up", reading{allocs: 1120 * mib, cpu: 3400 * ms, live: 100 * mib, held: 120 * mib}, false},
		{"quiet after it, 20 MiB of garbage: less than a quarter of the live heap", reading{allocs: 1121 * mib, cpu: 3405 * ms, live: 100 * mib, held: 120 * mib}, false},
		{"another burst", reading{allocs: 1500 * mib, cpu: 4300 * ms, live: 110 * mib, held: 240 * mib}, false},
		{"quiet again after it", reading{allocs: 1501 * mib, cpu: 4310 * ms, live: 110 * mib, held: 240 * mib}, true},
		{"a small heap: 10 MiB beyond 20 live is below minExcess", reading{allocs: 1800 * mib, cpu: 5000 * ms, live: 20 * mib, held: 30 * mib}, false},
		{"quiet with it", reading{allocs: 1801 * mib, cpu: 5010 * ms, live: 20 * mib, held: 30 * mib}, false},
		{"quiet, 20 MiB beyond 20 live: over minExcess", reading{allocs: 1802 * mib, cpu: 5020 * ms, live: 20 * mib, held: 40 * mib}, true},
	}
	for _, s := range steps {
		got := p.observe(s.r)
		if got != s.want {
			t.Errorf("%s: observe = %v, want %v", s.name, got, s.want)
		}
		if got {
			p.didReturn(s.r)
		}
	}
}

// TestRead checks that the metrics Run reads exist in this Go: a name the runtime
// does not know reads as zero, and the policy would never fire.
func TestRead(t *testing.T) {
	runtime.GC() // the live heap is known after a GC
	if r := read(newSamples()); r.allocs == 0 || r.live == 0 || r.held == 0 || r.cpu == 0 {
		t.Fatalf("reading %+v: a metric is missing", r)
	}
}

package gcpace

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"
)

const mib = 1 << 20

// TestPacer walks a pacer through a server's life: start-up, bursts over small and
// large live heaps, and the quiet after them.
func TestPacer(t *testing.T) {
	p := newPacer(100)
	steps := []struct {
		name    string
		r       reading
		percent int
		set     bool
	}{
		{"first reading: nothing to compare with", reading{allocs: 50 * mib, live: 20 * mib}, 100, false},
		{"idle", reading{allocs: 52 * mib, live: 20 * mib}, 100, false},
		{"a burst over a quarter of the headroom live: room for the headroom", reading{allocs: 200 * mib, live: Headroom / 4}, 400, true},
		{"still busy, the live heap a little larger", reading{allocs: 400 * mib, live: Headroom/4 + mib}, 400, false},
		{"still busy, the live heap twice as large", reading{allocs: 600 * mib, live: Headroom / 2}, 200, true},
		{"slower: back to the start's GOGC", reading{allocs: 610 * mib, live: Headroom / 2}, 100, true},
		{"quiet", reading{allocs: 611 * mib, live: Headroom / 2}, 100, false},
		{"a burst over a live heap larger than the headroom: Go's own pacing", reading{allocs: 900 * mib, live: 3 * Headroom}, 100, false},
		{"a burst over a tiny live heap: bounded", reading{allocs: 1200 * mib, live: Headroom / 100}, maxPercent, true},
		{"busy with a live heap not known yet", reading{allocs: 1500 * mib, live: 0}, 100, true},
	}
	for _, s := range steps {
		percent, set := p.observe(s.r)
		if percent != s.percent || set != s.set {
			t.Errorf("%s: observe = %d, %v; want %d, %v", s.name, percent, set, s.percent, s.set)
		}
	}
}

// TestPacerKeepsALargerBase: an operator's larger GOGC (through debug.SetGCPercent,
// since Run leaves an environment's alone) is never lowered.
func TestPacerKeepsALargerBase(t *testing.T) {
	p := newPacer(800)
	p.observe(reading{allocs: 0, live: Headroom / 2})
	if percent, set := p.observe(reading{allocs: 100 * mib, live: Headroom / 2}); percent != 800 || set {
		t.Errorf("busy with GOGC 800: observe = %d, %v; want 800, false", percent, set)
	}
}

// gogc reads the GOGC this process runs at.
func gogc() int {
	_, percent := read(newReader())
	return percent
}

// sink keeps the test's allocations from being optimized away.
var sink []byte

// TestRunPacesABurst runs the pacer in this process: GOGC rises while the test
// allocates fast over a small live heap, and is back where it was once the test
// stops, and when Run returns.
func TestRunPacesABurst(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: Run leaves it alone")
	}
	runtime.GC()
	base := gogc()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		cancel()
		<-done
	}()

	// Allocate ~200 MB/s, keeping almost nothing, until the pacer has looked at least
	// twice.
	raised := 0
	deadline := time.Now().Add(3 * Interval)
	for time.Now().Before(deadline) {
		for range 64 {
			sink = make([]byte, 32<<10)
		}
		time.Sleep(time.Millisecond)
		raised = max(raised, gogc())
	}
	if raised <= base {
		t.Fatalf("GOGC stayed at %d while the process allocated fast over a small heap", raised)
	}
	time.Sleep(3 * Interval)
	if got := gogc(); got != base {
		t.Errorf("GOGC %d once the process went quiet, want %d", got, base)
	}

	// Busy again, then Run ends: GOGC goes back.
	deadline = time.Now().Add(3 * Interval)
	for time.Now().Before(deadline) && gogc() == base {
		for range 64 {
			sink = make([]byte, 32<<10)
		}
		time.Sleep(time.Millisecond)
	}
	if gogc() == base {
		t.Fatalf("GOGC stayed at %d in the second burst", base)
	}
	cancel()
	<-done
	if got := gogc(); got != base {
		t.Errorf("GOGC %d after Run returned, want %d", got, base)
	}
}

package flowcontrol

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"mizzen/internal/testing/fakeclock"
)

// A ratio gauge keeps its count and denominator under its series' lock, so that a
// change takes that one lock: it has none of its own. Concurrent changes leave the
// series at the count they sum to over the last denominator.
func TestRatioGaugeTakesOneLock(t *testing.T) {
	typ := reflect.TypeFor[RatioGauge]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Type.PkgPath() == "sync" {
			t.Errorf("RatioGauge.%s is a %s: a change would take it and its series' lock", f.Name, f.Type)
		}
	}

	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	v := newTimedRatioVec(clock.Now, "ratio", "a ratio", []float64{1, 2, 4}, nil, "l")
	g := newRatioGauge(v.with("x"), clock.Now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 1000 {
				g.Add(1)
				if i > 0 {
					g.Add(-1)
				}
			}
		})
	}
	g.SetDenominator(4)
	wg.Wait()
	clock.Step(time.Second) // a second at 8 / 4

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(v)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	h := families[0].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != uint64(time.Second) || h.GetSampleSum() != 2*float64(time.Second) {
		t.Errorf("count %d, sum %v; want a second's nanoseconds at 2: %d, %v", h.GetSampleCount(), h.GetSampleSum(), time.Second, 2*float64(time.Second))
	}
	for _, b := range h.GetBucket() {
		if want := map[bool]uint64{true: uint64(time.Second)}[b.GetUpperBound() >= 2]; b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d ns, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

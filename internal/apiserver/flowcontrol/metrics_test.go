package flowcontrol

import (
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

// histogramOf is the histogram of the family's one series with the given labels
// (nil if there is none).
func histogramOf(t *testing.T, c *Controller, name string, labels ...string) *dto.Histogram {
	t.Helper()
	m := matching(t, c, name, labels...)
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0].GetHistogram()
	}
	t.Fatalf("%d series of %s%v, want one", len(m), name, labels)
	return nil
}

// bucketBounds are a histogram's upper bounds (+Inf left out).
func bucketBounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// cumulative is a histogram's cumulative count at the bucket of the bound.
func cumulative(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// wantHistogram is what a scraper should read of one histogram series.
type wantHistogram struct {
	metric string
	labels []string
	// absent: the series is not served at all.
	absent     bool
	count      uint64
	sum        float64
	bounds     []float64
	cumulative map[float64]uint64 // by upper bound, those checked
}

func checkHistograms(t *testing.T, c *Controller, wants []wantHistogram) {
	t.Helper()
	for _, w := range wants {
		h := histogramOf(t, c, w.metric, w.labels...)
		switch {
		case w.absent:
			if h != nil {
				t.Errorf("%s%v: served (%d observations), want no series", w.metric, w.labels, h.GetSampleCount())
			}
			continue
		case h == nil:
			t.Errorf("%s%v: no series", w.metric, w.labels)
			continue
		}
		if h.GetSampleCount() != w.count || h.GetSampleSum() != w.sum {
			t.Errorf("%s%v: count %d, sum %v; want %d, %v", w.metric, w.labels, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
		}
		if got := bucketBounds(h); !slices.Equal(got, w.bounds) {
			t.Errorf("%s%v: buckets %v, want upstream's %v", w.metric, w.labels, got, w.bounds)
		}
		for le, want := range w.cumulative {
			if got := cumulative(h, le); got != want {
				t.Errorf("%s%v: %d observations up to %v, want %d", w.metric, w.labels, got, le, want)
			}
		}
	}
}

// A known sequence of requests, timed by the fake clock, and what a scraper reads of
// the request series upstream's filter and queues keep. 12 seats: busy (7 shares,
// lends none) has 7 in one queue of 2, catch-all (5, rejects) 5; a busy request
// takes at most 2 seats (15% of 7, rounded up). a, b, c (2 seats each) and d (1)
// start at once, filling busy's seats; e (2 seats) and f (1) wait, the queue then
// 2 long; g finds it full and is turned away. Meanwhile an admin's watch (exempt)
// and carol's get (catch-all) run. 3 s later all are let go: the four that ran took
// 3 s each, the two that waited start then and take no time, the watch was
// initialized as its handler returned.
func TestRequestSeries(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 12, Clock: clock.now})
	c.Replace(priorityLevels, []runtime.Object{lending(limitedLevel("busy", 7, 1, 1, 2), 0, nil)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("busy", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "busy")})
	busy := c.states["busy"]
	if _, _, limit := busy.counts(); limit != 7 || busy.maxSeats.Load() != 2 {
		t.Fatalf("busy has %d seats, at most %d a request; want 7 and 2", limit, busy.maxSeats.Load())
	}
	b := newBlockingServer(t, c, map[string]registry.User{
		"busy":  {Name: "busy", Groups: []string{"busy"}},
		"admin": {Name: "admin", Groups: []string{"system:masters"}},
		"carol": {Name: "carol", Groups: []string{"system:authenticated"}},
	})
	codes := make(chan int, 10)
	for i, seats := range []int{2, 2, 2, 1, 2, 1} {
		go func() { codes <- b.getSeats("busy", "", seats) }()
		waitFor(t, "the request admitted", func() bool {
			executing, waiting, _ := busy.counts()
			return executing+waiting == i+1
		})
	}
	if code := b.get("busy", ""); code != http.StatusTooManyRequests {
		t.Fatalf("a request finding its queue full: %d, want 429", code)
	}
	go func() { codes <- b.send("admin", "watch", "", 0) }()
	go func() { codes <- b.get("carol", "") }()
	waitFor(t, "the watch and carol's get running", func() bool { return b.startedBy("admin") == 1 && b.startedBy("carol") == 1 })

	for _, tc := range []struct {
		metric string
		want   float64
	}{
		{"apiserver_flowcontrol_current_inqueue_seats", 3},
		{"apiserver_flowcontrol_current_inqueue_requests", 2},
	} {
		if got := seriesValue(t, c, tc.metric, "priority_level", "busy", "flow_schema", "busy"); got != tc.want {
			t.Errorf("while e and f wait: %s{busy} %v, want %v", tc.metric, got, tc.want)
		}
	}

	clock.step(3 * time.Second)
	b.releaseAll()
	for range 8 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request that ran or waited: %d", code)
		}
	}
	if got := seriesValue(t, c, "apiserver_flowcontrol_current_inqueue_seats", "priority_level", "busy", "flow_schema", "busy"); got != 0 {
		t.Errorf("after all: current_inqueue_seats{busy} %v, want 0", got)
	}
	const executionSeconds, queueLength = "apiserver_flowcontrol_request_execution_seconds", "apiserver_flowcontrol_request_queue_length_after_enqueue"
	durations := []float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30} // upstream's
	checkHistograms(t, c, []wantHistogram{
		{metric: executionSeconds, labels: []string{"priority_level", "busy", "flow_schema", "busy", "type", "regular"},
			count: 6, sum: 12, bounds: durations, cumulative: map[float64]uint64{0: 2, 2: 2, 5: 6}},
		{metric: executionSeconds, labels: []string{"priority_level", "busy", "flow_schema", "busy", "type", "watch"},
			bounds: durations},
		{metric: executionSeconds, labels: []string{"priority_level", "exempt", "flow_schema", "exempt", "type", "watch"},
			count: 1, sum: 3, bounds: durations, cumulative: map[float64]uint64{2: 0, 5: 1}},
		{metric: executionSeconds, labels: []string{"priority_level", "catch-all", "flow_schema", "catch-all", "type", "regular"},
			count: 1, sum: 3, bounds: durations, cumulative: map[float64]uint64{2: 0, 5: 1}},
		// Every admitted request of a queuing level joins a queue: the four that
		// started at once found theirs empty, e and f 1 and 2 long with them.
		{metric: queueLength, labels: []string{"priority_level", "busy", "flow_schema", "busy"},
			count: 6, sum: 7, bounds: []float64{0, 10, 25, 50, 100, 250, 500, 1000}, cumulative: map[float64]uint64{0: 0, 10: 6}},
		{metric: queueLength, labels: []string{"priority_level", "exempt"}, absent: true},
		{metric: queueLength, labels: []string{"priority_level", "catch-all"}, absent: true},
	})
}

package flowcontrol

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
	"mizzen/internal/testing/fakeclock"
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
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 12, Clock: clock.Now})
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

	clock.Step(3 * time.Second)
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
		{metric: executionSeconds, labels: []string{"priority_level", "busy", "flow_schema", "busy", "type", "watch"}, absent: true},
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

// The utilization timing histograms, as upstream's: for each level, the nanoseconds
// its seats in use and its requests executing stood at each ratio to its current
// limit (or, while that is zero, a tenth of the server's seats), and its requests
// waiting at each ratio to what its queues hold; for the server, its read-only and
// mutating requests executing over all the levels' nominal seats, and waiting over
// all their queues' room. 20 seats: busy (45 shares, lends none) has 18 and one
// queue of 50, catch-all 2, exempt none (so its ratios are over 2). Each case holds
// requests for 10 s of the fake clock.
func TestUtilizationHistograms(t *testing.T) {
	const (
		seatUtilization    = "apiserver_flowcontrol_priority_level_seat_utilization"
		requestUtilization = "apiserver_flowcontrol_priority_level_request_utilization"
		readVsWrite        = "apiserver_flowcontrol_read_vs_write_current_requests"
	)
	// Upstream's buckets.
	bounds := map[string][]float64{
		seatUtilization:    {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1},
		requestUtilization: {0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.25, 0.5, 0.75, 1},
		readVsWrite:        {0, 0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1},
	}
	type send struct {
		user, verb string
		n, seats   int
	}
	type ratio struct {
		metric string
		labels []string
		ratio  float64
	}
	busySeats := func(r float64) ratio {
		return ratio{seatUtilization, []string{"phase", "executing", "priority_level", "busy"}, r}
	}
	busyRequests := func(phase string, r float64) ratio {
		return ratio{requestUtilization, []string{"phase", phase, "priority_level", "busy"}, r}
	}
	server := func(phase, kind string, r float64) ratio {
		return ratio{readVsWrite, []string{"phase", phase, "request_kind", kind}, r}
	}
	for _, tc := range []struct {
		name string
		send []send
		// level holds executing and waiting requests once all are sent.
		level              string
		executing, waiting int
		want               []ratio
	}{
		{name: "idle", level: "busy", want: []ratio{busySeats(0), busyRequests("executing", 0), busyRequests("waiting", 0),
			server("executing", "readOnly", 0), server("waiting", "readOnly", 0), server("executing", "mutating", 0), server("waiting", "mutating", 0)}},
		{name: "half the limit", send: []send{{"busy", "get", 9, 1}}, level: "busy", executing: 9,
			want: []ratio{busySeats(0.5), busyRequests("executing", 0.5), busyRequests("waiting", 0),
				server("executing", "readOnly", 9.0/20), server("executing", "mutating", 0)}},
		{name: "full and waiting", send: []send{{"busy", "list", 27, 1}}, level: "busy", executing: 18, waiting: 9,
			want: []ratio{busySeats(1), busyRequests("executing", 1), busyRequests("waiting", 9.0/50),
				server("executing", "readOnly", 18.0/20), server("waiting", "readOnly", 9.0/50), server("waiting", "mutating", 0)}},
		{name: "wide mutations: seats apart from requests", send: []send{{"busy", "create", 5, 2}}, level: "busy", executing: 5,
			want: []ratio{busySeats(10.0 / 18), busyRequests("executing", 5.0/18),
				server("executing", "mutating", 5.0/20), server("executing", "readOnly", 0)}},
		{name: "exempt over a tenth of the server", send: []send{{"admin", "delete", 1, 1}}, level: "exempt", executing: 1,
			want: []ratio{
				{seatUtilization, []string{"phase", "executing", "priority_level", "exempt"}, 0.5},
				{requestUtilization, []string{"phase", "executing", "priority_level", "exempt"}, 0.5},
				{requestUtilization, []string{"phase", "waiting", "priority_level", "exempt"}, 0},
				server("executing", "mutating", 1.0/20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock, b := busyLevelServer(t)
			for _, s := range tc.send {
				for range s.n {
					go b.send(s.user, s.verb, "", s.seats)
				}
			}
			waitFor(t, "the requests held", func() bool {
				executing, waiting, _ := c.states[tc.level].counts()
				return executing == tc.executing && waiting == tc.waiting
			})
			clock.Step(10 * time.Second)

			const period = uint64(10 * time.Second)
			for _, w := range tc.want {
				m := matching(t, c, w.metric, w.labels...)
				if len(m) != 1 {
					t.Errorf("%d series of %s%v, want 1", len(m), w.metric, w.labels)
					continue
				}
				if got := len(m[0].GetLabel()); got != len(w.labels)/2 {
					t.Errorf("%s%v: %d labels, want %d", w.metric, w.labels, got, len(w.labels)/2)
				}
				h := m[0].GetHistogram()
				if sum := w.ratio * float64(period); h.GetSampleCount() != period || math.Abs(h.GetSampleSum()-sum) > 1e-6*float64(period) {
					t.Errorf("%s%v: count %d, sum %v; want %d ns at %v: sum %v", w.metric, w.labels, h.GetSampleCount(), h.GetSampleSum(), period, w.ratio, sum)
				}
				if got := bucketBounds(h); !slices.Equal(got, bounds[w.metric]) {
					t.Errorf("%s: buckets %v, want upstream's %v", w.metric, got, bounds[w.metric])
				}
				for _, bucket := range h.GetBucket() {
					want := uint64(0)
					if bucket.GetUpperBound() >= w.ratio {
						want = period
					}
					if bucket.GetCumulativeCount() != want {
						t.Errorf("%s%v: bucket le=%v holds %d ns, want %d", w.metric, w.labels, bucket.GetUpperBound(), bucket.GetCumulativeCount(), want)
					}
				}
			}
		})
	}
}

// A dispatch that finds some of the level's seats free but not as many as the request
// at the head of the queue asks for counts, as upstream's, under that request's
// schema. busy has 7 seats and one queue; three 2-seat requests of wide take 6. A
// fourth (2 seats) waits: 1 free seat does not accommodate it (one); narrow's 1-seat
// request comes behind it, and the dispatch it makes finds wide's still at the head
// (two). Once the first three are let go, both start. As upstream's, a schema's
// series appears with its first count: narrow's never does.
func TestDispatchNoAccommodation(t *testing.T) {
	c := New(Options{ServerSeats: 12})
	c.Replace(priorityLevels, []runtime.Object{lending(limitedLevel("busy", 7, 1, 1, 10), 0, nil)})
	c.Replace(flowSchemas, []runtime.Object{
		schemaFor("wide", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "wide"),
		schemaFor("narrow", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "narrow"),
	})
	busy := c.states["busy"]
	b := newBlockingServer(t, c, map[string]registry.User{
		"wide":   {Name: "wide", Groups: []string{"wide"}},
		"narrow": {Name: "narrow", Groups: []string{"narrow"}},
	})
	count := func(schema string) float64 {
		m := matching(t, c, "apiserver_flowcontrol_request_dispatch_no_accommodation_total", "priority_level", "busy", "flow_schema", schema)
		if len(m) != 1 {
			return -1 // no series
		}
		return m[0].GetCounter().GetValue()
	}
	codes := make(chan int, 5)
	for i, step := range []struct {
		user, seats        int
		executing, waiting int
		wide, narrow       float64
	}{
		{0, 2, 1, 0, -1, -1},
		{0, 2, 2, 0, -1, -1},
		{0, 2, 3, 0, -1, -1},
		{0, 2, 3, 1, 1, -1},
		{1, 1, 3, 2, 2, -1},
	} {
		user := []string{"wide", "narrow"}[step.user]
		go func() { codes <- b.getSeats(user, "", step.seats) }()
		waitFor(t, "the request admitted", func() bool {
			executing, waiting, _ := busy.counts()
			return executing == step.executing && waiting == step.waiting
		})
		if got := [2]float64{count("wide"), count("narrow")}; got != [2]float64{step.wide, step.narrow} {
			t.Errorf("after request %d: no accommodation wide, narrow %v, want %v", i+1, got, [2]float64{step.wide, step.narrow})
		}
	}
	b.releaseAll()
	for range 5 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request: %d", code)
		}
	}
	if got := count("wide"); got != 2 {
		t.Errorf("after all: no accommodation for wide %v, want 2", got)
	}
}

// Each mutation's estimate samples the watchers its change will notify, as
// upstream's does, into watch_count_samples by level and schema: a token request
// (which changes nothing watched) and reads are not sampled.
func TestWatchCountSamples(t *testing.T) {
	timers := &fakeTimers{}
	c := New(Options{AfterFunc: timers.afterFunc})
	c.Replace(priorityLevels, nil) // the mandatory exempt and catch-all levels only
	c.Replace(flowSchemas, nil)
	watchers := 0
	forgets := []func(){}
	defer func() {
		for _, f := range forgets {
			f()
		}
	}()
	inner := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	describe := func(r *http.Request, req *Request) bool {
		*req = *resourceRequest("alice", []string{"system:authenticated"}, r.Header.Get("Verb"), "", r.Header.Get("Resource"), r.Header.Get("Subresource"), "default")
		return true
	}
	srv := httptest.NewServer(c.Handler(inner, describe, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		watchers                    int
		verb, resource, subresource string
	}{
		{0, "create", "configmaps", ""},
		{9, "update", "configmaps", ""},
		{40, "delete", "configmaps", ""},
		{40, "get", "configmaps", ""},
		{40, "list", "configmaps", ""},
		{40, "create", "serviceaccounts", "token"},
	} {
		for ; watchers < tc.watchers; watchers++ {
			forgets = append(forgets, c.watches.register(&Request{Resource: "configmaps"}))
		}
		if code := <-sendAsync(srv.URL, "Verb", tc.verb, "Resource", tc.resource, "Subresource", tc.subresource); code != http.StatusOK {
			t.Fatalf("%s %s: %d", tc.verb, tc.resource, code)
		}
	}
	checkHistograms(t, c, []wantHistogram{
		{metric: "apiserver_flowcontrol_watch_count_samples", labels: []string{"priority_level", "catch-all", "flow_schema", "catch-all"},
			count: 3, sum: 49, bounds: []float64{0, 1, 10, 100, 1000, 10000}, cumulative: map[float64]uint64{0: 1, 1: 1, 10: 2, 100: 3}},
	})
}

// When a level's virtual time R nears the end of its range it is shifted back, with
// every active queue's and waiting request's virtual times, and
// epoch_advance_total{success} counts it: "false" when one of those was below the
// shift (it wraps: upstream's underflow).
func TestEpochAdvances(t *testing.T) {
	for _, tc := range []struct {
		name          string
		nextDispatchR seatSeconds
		success       string
	}{
		{"in range", highR - 1, "true"},
		{"a queue active since before", 5, "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
			c := New(Options{ServerSeats: 6, Clock: clock.Now})
			c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 1, 1, 10)})
			c.Replace(flowSchemas, nil)
			l := c.states["one"]
			r := &request{flow: 1}
			r.setWork(1, 0, 0)
			l.mu.Lock()
			if started, _ := l.admitLocked(r); !started {
				t.Fatal("the request did not start")
			}
			l.currentR, l.queues[0].nextDispatchR = highR-1, tc.nextDispatchR
			l.mu.Unlock()
			if m := metricsNamed(t, c, "apiserver_flowcontrol_epoch_advance_total"); len(m) != 0 {
				t.Fatalf("before any advance: %d series", len(m))
			}
			clock.Step(time.Second) // R advances by a seat-second
			l.mu.Lock()
			l.syncTimeLocked(clock.Now())
			afterR := l.currentR
			l.mu.Unlock()
			if afterR >= rDecrement {
				t.Errorf("R %v after the advance, want below %v", afterR, rDecrement)
			}
			m := metricsNamed(t, c, "apiserver_flowcontrol_epoch_advance_total")
			if len(m) != 1 {
				t.Fatalf("%d series, want 1", len(m))
			}
			labels := map[string]string{}
			for _, lp := range m[0].GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["priority_level"] != "one" || labels["success"] != tc.success || m[0].GetCounter().GetValue() != 1 {
				t.Errorf("epoch_advance_total %v = %v, want {priority_level=one, success=%s} 1", labels, m[0].GetCounter().GetValue(), tc.success)
			}
		})
	}
}

// As upstream's, a schema's series appear once a request has changed them, not when
// the configuration names the schema: with the configuration loaded there are none;
// a get that busy's schema (on a queuing level) runs at once makes those its
// admission and dispatch touched, the queue's included (upstream enqueues it first);
// the other schemas, and what the get did not touch, still have none.
func TestSchemaSeriesAppearOnFirstUse(t *testing.T) {
	c := New(Options{ServerSeats: 12})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("busy", 7, 1, 1, 2)})
	c.Replace(flowSchemas, []runtime.Object{
		schemaFor("busy", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "busy"),
		schemaFor("idle", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "idle"),
	})
	// schemaSeries are the family's series, each as its schema and its labels but
	// the schema and the level.
	schemaSeries := func(name string) []string {
		var out []string
		for _, m := range metricsNamed(t, c, "apiserver_flowcontrol_"+name) {
			var s []string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "flow_schema":
					s = append([]string{l.GetValue()}, s...)
				case "priority_level":
				default:
					s = append(s, l.GetName()+"="+l.GetValue())
				}
			}
			out = append(out, strings.Join(s, " "))
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{
		"dispatched_requests_total":               {"busy"},
		"rejected_requests_total":                 nil,
		"current_executing_requests":              {"busy"},
		"current_executing_seats":                 {"busy"},
		"current_inqueue_requests":                {"busy"},
		"current_inqueue_seats":                   {"busy"},
		"request_wait_duration_seconds":           {"busy execute=true"},
		"request_execution_seconds":               {"busy type=regular"},
		"request_queue_length_after_enqueue":      {"busy"},
		"work_estimated_seats":                    {"busy"},
		"request_dispatch_no_accommodation_total": nil,
		"watch_count_samples":                     nil,
	}
	for name := range want {
		if got := schemaSeries(name); len(got) != 0 {
			t.Errorf("before any request: %s has series %q, want none", name, got)
		}
	}
	b := newBlockingServer(t, c, map[string]registry.User{"busy": {Name: "busy", Groups: []string{"busy"}}})
	b.releaseAll()
	if code := b.get("busy", ""); code != http.StatusOK {
		t.Fatalf("busy's get: %d", code)
	}
	for name, w := range want {
		if got := schemaSeries(name); !slices.Equal(got, w) {
			t.Errorf("after busy's get: %s has series %q, want %q", name, got, w)
		}
	}
}

// levelSeriesOf are the series labelled with the level, by family and labels: a
// gauge's or counter's value, a histogram's count and sum.
func levelSeriesOf(t *testing.T, c *Controller, level string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range gatherAll(t, c) {
		for _, m := range f.GetMetric() {
			var labels []string
			ofLevel := false
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
				ofLevel = ofLevel || l.GetName() == "priority_level" && l.GetValue() == level
			}
			if !ofLevel {
				continue
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Gauge != nil:
				out[key] = fmt.Sprint(m.GetGauge().GetValue())
			case m.Counter != nil:
				out[key] = fmt.Sprint(m.GetCounter().GetValue())
			case m.Histogram != nil:
				out[key] = fmt.Sprint(m.GetHistogram().GetSampleCount(), " ", m.GetHistogram().GetSampleSum())
			}
		}
	}
	return out
}

// A deleted level's series stay, as upstream's, which never deletes them: once the
// level is gone (at once if it held no request, otherwise when its last one is done)
// its gauges keep their last values and its counters their counts, and its timing
// histograms go on counting the nanoseconds at their last ratio (0, the level idle):
// their counts grow with the clock, their sums do not.
func TestDeletedLevelKeepsItsSeries(t *testing.T) {
	timing := []string{"apiserver_flowcontrol_demand_seats", "apiserver_flowcontrol_priority_level_seat_utilization",
		"apiserver_flowcontrol_priority_level_request_utilization"}
	shown := append([]string{"apiserver_flowcontrol_nominal_limit_seats", "apiserver_flowcontrol_lower_limit_seats",
		"apiserver_flowcontrol_upper_limit_seats", "apiserver_flowcontrol_current_limit_seats",
		"apiserver_flowcontrol_demand_seats_high_watermark", "apiserver_flowcontrol_demand_seats_average",
		"apiserver_flowcontrol_demand_seats_stdev", "apiserver_flowcontrol_demand_seats_smoothed",
		"apiserver_flowcontrol_target_seats", "apiserver_flowcontrol_current_r", "apiserver_flowcontrol_dispatch_r",
		"apiserver_flowcontrol_latest_s", "apiserver_flowcontrol_next_s_bounds", "apiserver_flowcontrol_next_discounted_s_bounds"},
		timing...)
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
			c := New(Options{ServerSeats: 600, Clock: clock.Now})
			small := limitedLevel("small", 10, 2, 1, 10)
			c.Replace(priorityLevels, []runtime.Object{small})
			c.Replace(flowSchemas, []runtime.Object{schemaFor("batch", "small", flowcontrolv1.FlowDistinguisherMethodByUserType, "batch")})
			// A request runs 10 ms: R 0.01, and the dispatch series made.
			l := c.states["small"]
			r := &request{schema: "batch", flow: 1}
			r.setWork(1, 0, 0)
			if _, reason := l.acquire(context.Background(), r, time.Hour, func() { t.Fatal("queued") }); reason != "" {
				t.Fatal(reason)
			}
			clock.Step(10 * time.Millisecond)
			if !busy {
				l.release(r)
			}
			c.Apply(small, true)
			if busy {
				if c.states["small"] == nil {
					t.Fatal("small deleted while busy is gone, want it quiescing")
				}
				if !l.release(r) {
					t.Fatal("small's last request done: not reapable")
				}
			}
			before := levelSeriesOf(t, c, "small")
			if busy {
				c.reap()
			}
			if c.states["small"] != nil {
				t.Fatal("small is still there, want it gone")
			}
			for _, name := range shown {
				found := false
				for key := range before {
					found = found || strings.HasPrefix(key, name+"{")
				}
				if !found {
					t.Errorf("no %s series of small before it went", name)
				}
			}
			if got := before[`apiserver_flowcontrol_current_r{priority_level=small}`]; got != "0.01" {
				t.Errorf("current_r %s, want 0.01", got)
			}

			clock.Step(time.Second)
			after := levelSeriesOf(t, c, "small")
			for key, was := range before {
				want := was
				for _, name := range timing {
					if strings.HasPrefix(key, name+"{") {
						var count uint64
						var sum float64
						fmt.Sscan(was, &count, &sum)
						want = fmt.Sprint(count+uint64(time.Second), " ", sum)
					}
				}
				if got, ok := after[key]; !ok {
					t.Errorf("%s gone with the level", key)
				} else if got != want {
					t.Errorf("%s: %s a second after the level went, want %s", key, got, want)
				}
			}
		})
	}
}

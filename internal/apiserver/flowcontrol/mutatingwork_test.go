package flowcontrol

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/testing/fakeclock"
)

// Upstream's numbers: a seat per 10 watchers (none under 10) for 5 ms, at most 10
// seats or the level's maximum, the same seat-seconds over fewer seats held longer.
func TestMutationWork(t *testing.T) {
	for _, tc := range []struct {
		watchers, maxSeats int
		seats              int
		latency            time.Duration
	}{
		{0, 10, 0, 0},
		{9, 10, 0, 0},
		{10, 10, 1, 5 * time.Millisecond},
		{25, 10, 3, 5 * time.Millisecond},
		{1000, 100, 10, 50 * time.Millisecond},
		{100, 4, 4, 12500 * time.Microsecond},
		{30, 1, 1, 15 * time.Millisecond},
	} {
		seats, latency := mutationWork(tc.watchers, tc.maxSeats)
		if seats != tc.seats || latency != tc.latency {
			t.Errorf("%d watchers, at most %d seats: %d seats for %v, want %d for %v", tc.watchers, tc.maxSeats, seats, latency, tc.seats, tc.latency)
		}
	}
}

// A change notifies the watches of its resource in every namespace, in its namespace
// and of its object, as upstream's tracker counts them; a watch of pods on one node is
// not counted.
func TestWatchCounts(t *testing.T) {
	var c watchCounts
	watch := func(ns, name string) func() {
		return c.register(&Request{ResourceRequest: true, Verb: "watch", Resource: "configmaps", Namespace: ns, Name: name})
	}
	forgets := []func(){watch("", ""), watch("", ""), watch("a", ""), watch("a", "x"), watch("b", ""), watch("b", "x")}
	c.register(&Request{ResourceRequest: true, Verb: "watch", Resource: "pods", IndexedWatch: true})
	count := func(resource, ns, name string) int {
		return c.interested(&Request{ResourceRequest: true, Verb: "update", Resource: resource, Namespace: ns, Name: name})
	}
	for _, tc := range []struct {
		ns, name string
		want     int
	}{{"a", "x", 4}, {"a", "", 3}, {"a", "y", 3}, {"b", "x", 4}, {"c", "x", 2}, {"", "", 2}} {
		if got := count("configmaps", tc.ns, tc.name); got != tc.want {
			t.Errorf("a change of configmaps %s/%s notifies %d, want %d", tc.ns, tc.name, got, tc.want)
		}
	}
	if got := count("pods", "a", "p"); got != 0 {
		t.Errorf("pods watched on one node: counted %d", got)
	}
	if got := count("secrets", "a", "p"); got != 0 {
		t.Errorf("secrets, unwatched: %d", got)
	}
	for _, f := range forgets {
		f()
	}
	if got := count("configmaps", "a", "x"); got != 0 {
		t.Errorf("with the watches ended: %d", got)
	}
}

// A mutation of a watched resource keeps its final seats for its additional latency
// after its handler returns: on a level of one seat, with 3 watches open through the
// filter and 37 more counted, a create is estimated at 4 final seats for 5 ms, capped at
// the level's 1 seat held 20 ms (the dump shows it), and a get that comes after the
// create's handler returned waits until that time has passed. An exempt create is
// estimated alike, and its 4 final seats are not capped by a limit.
func TestMutationHoldsFinalSeats(t *testing.T) {
	timers := &fakeTimers{}
	c := New(Options{ServerSeats: 6, AfterFunc: timers.afterFunc}) // the level's share: 1 of 6 (catch-all has 5)
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 1, 1, 10)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("s", "one", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	l := c.states["one"]
	if _, _, limit := l.counts(); limit != 1 {
		t.Fatalf("the level has %d seats, want 1", limit)
	}
	endWatches, createRuns, adminCreateRuns := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	getStarted := false
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Verb") {
		case "watch":
			WatchInitialized(r.Context())
			<-endWatches
		case "create":
			if r.Header.Get("Admin") != "" {
				<-adminCreateRuns
			} else {
				<-createRuns
			}
		case "get":
			mu.Lock()
			getStarted = true
			mu.Unlock()
		}
	})
	describe := func(r *http.Request, req *Request) bool {
		user, groups := "alice", []string{"system:authenticated"}
		if r.Header.Get("Admin") != "" {
			user, groups = "admin", []string{"system:masters"}
		}
		*req = *resourceRequest(user, groups, r.Header.Get("Verb"), "", "configmaps", "", "default")
		req.LongRunning = req.Verb == "watch"
		return true
	}
	srv := httptest.NewServer(c.Handler(inner, describe, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	defer close(endWatches) // first: the server's Close waits for the watches
	send := func(verb string, admin bool) chan int {
		if admin {
			return sendAsync(srv.URL, "Verb", verb, "Admin", "1")
		}
		return sendAsync(srv.URL, "Verb", verb)
	}
	for range 3 {
		send("watch", false)
	}
	configmap := &Request{ResourceRequest: true, Verb: "create", Resource: "configmaps", Namespace: "default"}
	waitFor(t, "3 watches counted", func() bool { return c.watches.interested(configmap) == 3 })
	for range 37 {
		defer c.watches.register(&Request{Resource: "configmaps"})()
	}

	created := send("create", false)
	waitFor(t, "the create running", func() bool { executing, _, _ := l.counts(); return executing == 1 })
	rows := rowsOf(dump(t, c, "dump_requests", requestHeader...), "one")
	if len(rows) != 1 || !slices.Equal(rows[0][6:9], []string{"1", "1", "20ms"}) {
		t.Errorf("the create's row %q, want initial seats 1, final seats 1, additional latency 20ms", rows)
	}
	close(createRuns)
	if code := <-created; code != http.StatusOK {
		t.Fatalf("create: %d", code)
	}
	if got := timers.started(); !slices.Equal(got, []time.Duration{20 * time.Millisecond}) {
		t.Errorf("the seats freed after %v, want 20ms", got)
	}
	if executing, _, _ := l.counts(); executing != 0 || l.seatsHeld() != 1 {
		t.Errorf("the create's handler returned: %d executing, %d seats held, want 0 and 1", executing, l.seatsHeld())
	}
	get := send("get", false)
	waitFor(t, "the get waiting", func() bool { _, waiting, _ := l.counts(); return waiting == 1 })
	mu.Lock()
	if getStarted {
		t.Error("the get ran while the create held its final seat")
	}
	mu.Unlock()
	timers.fireAll() // the 20 ms pass
	if code := <-get; code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}

	exempt := send("create", true)
	waitFor(t, "the exempt create running", func() bool {
		return len(rowsOf(dump(t, c, "dump_requests", requestHeader...), "exempt")) == 1
	})
	if row := rowsOf(dump(t, c, "dump_requests", requestHeader...), "exempt")[0]; !slices.Equal(row[6:9], []string{"1", "4", "5ms"}) {
		t.Errorf("the exempt create's row %q, want initial seats 1, final seats 4, additional latency 5ms", row)
	}
	close(adminCreateRuns)
	if code := <-exempt; code != http.StatusOK {
		t.Fatalf("exempt create: %d", code)
	}
}

// An exempt mutation is estimated as upstream's is: it never waits (nor shows in
// request_wait_duration_seconds), but a scraper sees its seats in
// work_estimated_seats and current_executing_seats, its final seats held
// there after its handler returned until their additional latency passed, and in the
// exempt level's demand, which the next adjustment gives it as its current limit.
func TestExemptMutationIsEstimated(t *testing.T) {
	for _, tc := range []struct {
		watchers int
		// seats are what the create holds while it runs (its estimate); final those
		// it keeps for latency after its handler returned.
		seats, final int
		latency      time.Duration
	}{
		{watchers: 0, seats: 1},
		{watchers: 9, seats: 1},
		{watchers: 40, seats: 4, final: 4, latency: 5 * time.Millisecond},
		{watchers: 250, seats: 10, final: 10, latency: 12500 * time.Microsecond},
	} {
		t.Run(fmt.Sprintf("%d watchers", tc.watchers), func(t *testing.T) {
			clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
			timers := &fakeTimers{}
			c := New(Options{Clock: clock.Now, AfterFunc: timers.afterFunc})
			c.Replace(priorityLevels, nil) // the mandatory exempt and catch-all levels only
			c.Replace(flowSchemas, nil)
			for range tc.watchers {
				defer c.watches.register(&Request{Resource: "configmaps"})()
			}
			running, proceed := make(chan struct{}), make(chan struct{})
			inner := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				close(running)
				<-proceed
			})
			describe := func(_ *http.Request, req *Request) bool {
				*req = *resourceRequest("admin", []string{"system:masters"}, "create", "", "configmaps", "", "default")
				return true
			}
			srv := httptest.NewServer(c.Handler(inner, describe, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			defer srv.Close()
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(proceed) }) }
			defer release() // first: the server's Close waits for the create
			exemptSeats := func() float64 {
				return seriesValue(t, c, "apiserver_flowcontrol_current_executing_seats", "priority_level", "exempt", "flow_schema", "exempt")
			}

			created := sendAsync(srv.URL)
			<-running
			if got := exemptSeats(); got != float64(tc.seats) {
				t.Errorf("while the create runs: current_executing_seats{exempt} %v, want %d", got, tc.seats)
			}
			if got := histogramSum(t, c, "apiserver_flowcontrol_work_estimated_seats", "priority_level", "exempt"); got != float64(tc.seats) {
				t.Errorf("work_estimated_seats{exempt} observed %v, want %d", got, tc.seats)
			}
			release()
			if code := <-created; code != http.StatusOK {
				t.Fatalf("create: %d", code)
			}
			if m := matching(t, c, "apiserver_flowcontrol_request_wait_duration_seconds", "priority_level", "exempt"); len(m) != 0 {
				t.Errorf("request_wait_duration_seconds has %d exempt series, want none: exempt requests never queue", len(m))
			}
			if got := matching(t, c, "apiserver_flowcontrol_dispatched_requests_total", "priority_level", "exempt", "flow_schema", "exempt"); len(got) != 1 || got[0].GetCounter().GetValue() != 1 {
				t.Errorf("dispatched_requests_total{exempt} %v, want 1", got)
			}
			if got := exemptSeats(); got != float64(tc.final) {
				t.Errorf("after the create's handler returned: current_executing_seats{exempt} %v, want %d", got, tc.final)
			}
			var wantTimers []time.Duration
			if tc.final > 0 {
				wantTimers = []time.Duration{tc.latency}
			}
			if got := timers.started(); !slices.Equal(got, wantTimers) {
				t.Errorf("final seats freed after %v, want %v", got, wantTimers)
			}
			timers.fireAll()
			if got := exemptSeats(); got != 0 {
				t.Errorf("after the additional latency: current_executing_seats{exempt} %v, want 0", got)
			}

			clock.Step(DefaultBorrowingPeriod)
			adjust(c)
			for _, name := range []string{"apiserver_flowcontrol_demand_seats_high_watermark", "apiserver_flowcontrol_current_limit_seats"} {
				if got := seriesValue(t, c, name, "priority_level", "exempt"); got != float64(tc.seats) {
					t.Errorf("%s{exempt} %v, want %d", name, got, tc.seats)
				}
			}
		})
	}
}

// fakeTimers records the timers a controller starts (Options.AfterFunc), for a test
// to fire when it says their time has passed.
type fakeTimers struct {
	mu    sync.Mutex
	after []time.Duration
	fire  []func()
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.after, ft.fire = append(ft.after, d), append(ft.fire, f)
}

// started is the durations of the timers started so far.
func (ft *fakeTimers) started() []time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return slices.Clone(ft.after)
}

// fireAll runs the functions of the timers started so far.
func (ft *fakeTimers) fireAll() {
	ft.mu.Lock()
	fire := slices.Clone(ft.fire)
	ft.mu.Unlock()
	for _, f := range fire {
		f()
	}
}

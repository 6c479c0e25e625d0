package flowcontrol

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/testing/fakeclock"
)

// flowOnQueue is a flow of the schema that a level of the given queues and hand size
// 1 deals the queue given.
func flowOnQueue(t *testing.T, schema string, queues, want int) uint64 {
	t.Helper()
	for i := range 1000 {
		flow := flowHash(schema, fmt.Sprint("flow-", i))
		got := -1
		dealHand(flow, queues, 1, func(q int) { got = q })
		if got == want {
			return flow
		}
	}
	t.Fatalf("no flow on queue %d", want)
	return 0
}

// simulation drives one level by hand, on a fake clock: requests are admitted without
// blocking and each runs for a fixed time from its start.
type simulation struct {
	t         *testing.T
	clock     *fakeclock.Clock
	c         *Controller
	l         *level
	pending   []*request // admitted, not yet dispatched
	executing []*request
	ends      map[*request]time.Time
	order     []*request // in dispatch order
	runFor    time.Duration
}

func newSimulation(t *testing.T, seats int, queues, handSize int32) *simulation {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	// The level has 1 share of 6 (the mandatory catch-all has 5): a sixth of the seats.
	c := New(Options{ServerSeats: 6 * seats, Clock: clock.Now})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, queues, handSize, 1000)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("s", "one", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	l := c.states["one"]
	if _, _, limit := l.counts(); limit != seats {
		t.Fatalf("the level has %d seats, want %d", limit, seats)
	}
	return &simulation{t: t, clock: clock, c: c, l: l, ends: map[*request]time.Time{}, runFor: 10 * time.Millisecond}
}

// admit brings a request of the flow and seats.
func (s *simulation) admit(name string, flow uint64, seats int) *request {
	r := &request{flow: flow, schema: name}
	r.setWork(seats, 0, 0)
	s.l.mu.Lock()
	started, reason := s.l.admitLocked(r)
	s.l.mu.Unlock()
	if reason != "" {
		s.t.Fatalf("%s rejected: %s", name, reason)
	}
	s.pending = append(s.pending, r)
	if started {
		s.collect()
	}
	return r
}

// collect notes the requests dispatched since the last look, in start order.
func (s *simulation) collect() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	for _, r := range slices.Clone(s.pending) {
		if r.list != nil { // executing
			s.pending = slices.DeleteFunc(s.pending, func(x *request) bool { return x == r })
			s.executing = append(s.executing, r)
			s.ends[r] = r.start.Add(s.runFor)
			s.order = append(s.order, r)
		}
	}
}

// step ends the request that finishes first, at its end time.
func (s *simulation) step() {
	if len(s.executing) == 0 {
		s.t.Fatal("nothing executes")
	}
	first := 0
	for i, r := range s.executing {
		if s.ends[r].Before(s.ends[s.executing[first]]) {
			first = i
		}
	}
	r := s.executing[first]
	s.executing = slices.Delete(s.executing, first, first+1)
	if d := s.ends[r].Sub(s.clock.Now()); d > 0 {
		s.clock.Step(d)
	}
	s.l.release(r)
	s.collect()
}

// Fair queuing shares a level's seat-seconds among its busy queues: with two flows
// kept backlogged, one sending 1-seat requests and one sending 4-seat requests that
// run as long, the narrow flow gets four dispatches for each of the wide one's (and
// each queue about half of the seat-seconds). Served in turn, the two would get as
// many dispatches each.
func TestWideRequestsGetFewerDispatches(t *testing.T) {
	s := newSimulation(t, 4, 2, 1)
	narrow, wide := flowOnQueue(t, "s", 2, 0), flowOnQueue(t, "s", 2, 1)
	for range 100 {
		s.admit("narrow", narrow, 1)
		s.admit("wide", wide, 4)
	}
	for len(s.order) < 100 {
		s.step()
	}
	count := map[string]int{}
	seatSecs := map[string]int{}
	for _, r := range s.order[:100] {
		count[r.schema]++
		seatSecs[r.schema] += r.seats
	}
	if count["narrow"] < 3*count["wide"] || count["narrow"] > 5*count["wide"] {
		t.Errorf("of 100 dispatches, %d narrow and %d wide, want about 4 narrow to 1 wide", count["narrow"], count["wide"])
	}
	if d := seatSecs["narrow"] - seatSecs["wide"]; d < -8 || d > 8 {
		t.Errorf("seats × time: narrow %d, wide %d, want about equal", seatSecs["narrow"], seatSecs["wide"])
	}

	// The dump shows each queue's virtual time: both queues busy, about even.
	rows := rowsOf(dump(t, &Controller{states: map[string]*level{"one": s.l}}, "dump_queues", queueHeader...), "one")
	var rs []time.Duration
	for _, row := range rows {
		var sec, frac int64
		if _, err := fmt.Sscanf(row[5], "%d.%dss", &sec, &frac); err != nil {
			t.Fatalf("NextDispatchR %q: %v", row[5], err)
		}
		rs = append(rs, time.Duration(sec)*time.Second+time.Duration(frac*10))
	}
	if len(rs) != 2 || rs[0] == 0 || rs[1] == 0 || max(rs[0], rs[1])-min(rs[0], rs[1]) > 100*time.Millisecond {
		t.Errorf("the queues' NextDispatchR %v, want both busy and within a wide request's work of each other", rows)
	}
}

// A request that does not fit the free seats holds up those behind it in virtual
// time, as upstream's: the narrow flow's next request does not slip past a wide one
// whose turn it is, though a seat is free.
func TestWideRequestIsNotPassed(t *testing.T) {
	s := newSimulation(t, 4, 2, 1)
	narrow, wide := flowOnQueue(t, "s", 2, 0), flowOnQueue(t, "s", 2, 1)
	for range 4 {
		s.admit("narrow", narrow, 1) // all start at once
	}
	w := s.admit("wide", wide, 4)
	s.admit("narrow", narrow, 1)
	if len(s.order) != 4 {
		t.Fatalf("%d dispatched, want the first 4 narrow ones", len(s.order))
	}
	// The narrow queue was charged 4 requests' work, the wide one nothing yet: the
	// wide request finishes first in virtual time, and waits for its 4 seats.
	s.step()
	if len(s.order) != 4 {
		t.Errorf("with one seat free, %s was dispatched; want nothing before the wide one", s.order[4].schema)
	}
	for range 3 {
		s.step()
	}
	if len(s.order) != 5 || s.order[4] != w {
		t.Errorf("with the seats free, dispatched %d; want the wide one 5th", len(s.order))
	}
}

// The virtual times upstream's queueset shows, on a level of 2 seats and 2 queues
// whose requests (1 seat, 3 ms of work each) run 10 ms: a and b of flow 0 start at
// once, c of flow 1 and d of flow 0 wait; at 10 ms a ends, R has advanced by 1 × 10
// ms (2 seats over 2 busy queues), queue 0's S is b's and d's work plus a's real
// time, and c, whose queue's S is the R it came at, goes first; b ends then too, and
// d goes. current_r is set with every change, the dispatch series with every
// dispatch from a queue, before the request's work is charged.
func TestVirtualTimeSeries(t *testing.T) {
	s := newSimulation(t, 2, 2, 1)
	q0, q1 := flowOnQueue(t, "s", 2, 0), flowOnQueue(t, "s", 2, 1)
	type state struct {
		currentR, dispatchR, latestS, sMin, sMax, dMin, dMax float64
	}
	read := func() state {
		v := func(name string, labels ...string) float64 {
			return seriesValue(t, s.c, "apiserver_flowcontrol_"+name, append([]string{"priority_level", "one"}, labels...)...)
		}
		return state{v("current_r"), v("dispatch_r"), v("latest_s"), v("next_s_bounds", "bound", "min"), v("next_s_bounds", "bound", "max"),
			v("next_discounted_s_bounds", "bound", "min"), v("next_discounted_s_bounds", "bound", "max")}
	}
	if got := read(); got.currentR != 0 || !math.IsNaN(got.dispatchR+got.latestS+got.sMin+got.sMax+got.dMin+got.dMax) {
		t.Errorf("before any request: %+v, want current_r 0 and no dispatch series", got)
	}
	for _, level := range []string{"exempt", "catch-all"} {
		if r := seriesValue(t, s.c, "apiserver_flowcontrol_current_r", "priority_level", level); r != 0 {
			t.Errorf("%s (no queues): current_r %v, want 0", level, r)
		}
	}
	for i, step := range []struct {
		do   func()
		want state
	}{
		{func() { s.admit("a", q0, 1) }, state{0, 0, 0, 0, 0, 0, 0}},
		// Its queue has a executing: S 0.003, less a's 1 seat × 3 ms.
		{func() { s.admit("b", q0, 1) }, state{0, 0, 0.003, 0.003, 0.003, 0, 0}},
		{func() { s.admit("c", q1, 1); s.admit("d", q0, 1) }, state{0, 0, 0.003, 0.003, 0.003, 0, 0}},
		// Queue 0: S 0.006 + 0.010 - 0.003, b's seat in use; queue 1: S 0.
		{s.step, state{0.01, 0.01, 0, 0, 0.013, 0, 0.010}},
		// Queue 0: S 0.013 + 0.007, nothing in use; queue 1 waits no more.
		{s.step, state{0.01, 0.01, 0.020, 0.020, 0.020, 0.020, 0.020}},
	} {
		step.do()
		if got := read(); got != step.want {
			t.Errorf("step %d: %+v, want %+v", i+1, got, step.want)
		}
	}
	var order []string
	for _, r := range s.order {
		order = append(order, r.schema)
	}
	if !slices.Equal(order, []string{"a", "b", "c", "d"}) {
		t.Errorf("dispatched %v, want a, b, c, d", order)
	}
}

// A request that starts at once on a queuing level raises its queue's S to R first,
// as upstream's, which enqueues it (and keeps a queue's S no earlier than its oldest
// request's arrival R) before it dispatches it: a queue does not bank the service its
// long request did not ask for. a runs alone on 2 seats; 5 ms later R is 0.005 (1
// seat over 1 busy queue), past a's 0.003 of work, and b of the same flow starts at S
// 0.005.
func TestStartAtOnceBoundsS(t *testing.T) {
	s := newSimulation(t, 2, 2, 1)
	q0 := flowOnQueue(t, "s", 2, 0)
	s.admit("a", q0, 1)
	s.clock.Step(5 * time.Millisecond)
	s.admit("b", q0, 1)
	for _, tc := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"dispatch_r", nil, 0.005},
		{"latest_s", nil, 0.005},
		{"next_s_bounds", []string{"bound", "min"}, 0.005},
		{"next_discounted_s_bounds", []string{"bound", "max"}, 0.002}, // less a's seat × 3 ms
	} {
		if got := seriesValue(t, s.c, "apiserver_flowcontrol_"+tc.name, append([]string{"priority_level", "one"}, tc.label...)...); got != tc.want {
			t.Errorf("%s%v: %v, want %v", tc.name, tc.label, got, tc.want)
		}
	}
	if got := s.l.queues[0].nextDispatchR; got != seatsTimes(1, 8*time.Millisecond) {
		t.Errorf("queue 0's S %v after b's work, want 0.008", got)
	}
}

// However a queued request's wait ends, the level syncs its virtual time as it does
// and shows it in current_r, as upstream's queueset does as each wait ends. On a level
// of 1 seat and 2 queues, a runs and b waits 10 ms: R advances at 1 seat over the 2
// busy queues, to 0.005. Then b gives up (its client gone, or its wait limit passed),
// or is dispatched by a raised limit and gets to run 10 ms later, R having advanced at
// 2 seats over 2 queues meanwhile, to 0.015.
func TestWaitEndShowsR(t *testing.T) {
	for _, tc := range []struct {
		name       string
		waitLimit  time.Duration
		end        func(s *simulation, cancel func())
		wantReason string
		want       float64
	}{
		{"cancelled", time.Hour, func(_ *simulation, cancel func()) { cancel() }, rejectTimeout, 0.005},
		{"wait limit", time.Millisecond, func(*simulation, func()) {}, rejectTimeout, 0.005},
		{"dispatched", time.Hour, func(s *simulation, _ func()) {
			s.l.setLimit(2, 2) // b starts, R shown 0.005
			s.clock.Step(10 * time.Millisecond)
		}, "", 0.015},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimulation(t, 1, 2, 1)
			s.admit("a", flowOnQueue(t, "s", 2, 0), 1)
			b := &request{flow: flowOnQueue(t, "s", 2, 1), schema: "b"}
			b.setWork(1, 0, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, reason := s.l.acquire(ctx, b, tc.waitLimit, func() {
				s.clock.Step(10 * time.Millisecond)
				tc.end(s, cancel)
			})
			if reason != tc.wantReason {
				t.Errorf("b's wait ended with %q, want %q", reason, tc.wantReason)
			}
			if got := seriesValue(t, s.c, "apiserver_flowcontrol_current_r", "priority_level", "one"); got != tc.want {
				t.Errorf("current_r %v as b's wait ended, want %v", got, tc.want)
			}
		})
	}
}

package flowcontrol

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"mizzen/internal/registry"
	"mizzen/internal/testing/fakeclock"
)

// adjust runs one borrowing adjustment, as RunBorrowing does every period.
func adjust(c *Controller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adjustLimitsLocked()
}

func limitOf(c *Controller, name string) int {
	_, _, limit := c.states[name].counts()
	return limit
}

func lending(pl *flowcontrolv1.PriorityLevelConfiguration, lendable int32, borrowing *int32) *flowcontrolv1.PriorityLevelConfiguration {
	pl.Spec.Limited.LendablePercent = ptr.To(lendable)
	pl.Spec.Limited.BorrowingLimitPercent = borrowing
	return pl
}

// A level whose neighbour is idle borrows its seats. 20 seats: busy (45 shares, lends
// none) has 9, idle (50 shares, may lend 60%, so keeps 4) 10, catch-all (5) 1; before
// any demand is seen they get 13, 6 and 1 (their lower bounds' proportion of 20).
// After a period in which busy had 20 requests to run, it gets 15 seats and runs 15
// at once, while idle keeps its 4 non-lendable seats. A period later, with the burst
// over, busy's smoothed demand still holds its claim.
func TestBorrowingGivesIdleSeatsToABusyLevel(t *testing.T) {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 20, Clock: clock.Now, BorrowingPeriod: 5 * time.Millisecond})
	c.Replace(priorityLevels, []runtime.Object{
		lending(limitedLevel("busy", 45, 1, 1, 50), 0, nil),
		lending(limitedLevel("idle", 50, 1, 1, 50), 60, ptr.To[int32](100)),
	})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("busy", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "busy"),
		schemaFor("idle", "idle", flowcontrolv1.FlowDistinguisherMethodByUserType, "idle")})
	if got, want := gaugeValues(t, c, "apiserver_flowcontrol_current_limit_seats"), "busy 13 catch-all 1 exempt 0 idle 6"; got != want {
		t.Fatalf("after configuration: seats %s, want %s", got, want)
	}
	b := newBlockingServer(t, c, map[string]registry.User{"busy": {Name: "busy", Groups: []string{"busy"}}})
	codes := make(chan int, 20)
	for range 20 {
		go func() { codes <- b.get("busy", "") }()
	}
	waitFor(t, "13 running and 7 waiting", func() bool {
		executing, waiting, _ := c.states["busy"].counts()
		return executing == 13 && waiting == 7
	})

	clock.Step(DefaultBorrowingPeriod)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.RunBorrowing(ctx)
	waitFor(t, "15 running after the adjustment", func() bool {
		executing, waiting, _ := c.states["busy"].counts()
		return executing == 15 && waiting == 5 && b.startedBy("busy") == 15
	})
	cancel()
	if idle := limitOf(c, "idle"); idle != 4 {
		t.Errorf("the idle level has %d seats, want its 4 non-lendable ones", idle)
	}
	for metric, want := range map[string]string{
		"apiserver_flowcontrol_current_limit_seats": "busy 15 catch-all 1 exempt 0 idle 4",
		"apiserver_flowcontrol_lower_limit_seats":   "busy 9 catch-all 1 exempt 0 idle 4",
		"apiserver_flowcontrol_upper_limit_seats":   "busy 29 catch-all 21 exempt 20 idle 20",
		"apiserver_flowcontrol_nominal_limit_seats": "busy 9 catch-all 1 exempt 0 idle 10",
		// What the adjustment went by: busy's demand, 20 seats all the period; the
		// targets (busy's smoothed demand, the others' lower bounds), all scaled by
		// the fair fraction 0.75 within their bounds. The exempt level, which has
		// none, shows the first limited level's, as upstream's.
		"apiserver_flowcontrol_demand_seats_high_watermark": "busy 20 catch-all 0 exempt 0 idle 0",
		"apiserver_flowcontrol_demand_seats_average":        "busy 20 catch-all 0 exempt 0 idle 0",
		"apiserver_flowcontrol_demand_seats_stdev":          "busy 0 catch-all 0 exempt 0 idle 0",
		"apiserver_flowcontrol_demand_seats_smoothed":       "busy 20 catch-all 0 exempt 0 idle 0",
		"apiserver_flowcontrol_target_seats":                "busy 20 catch-all 1 exempt 20 idle 4",
	} {
		if got := gaugeValues(t, c, metric); got != want {
			t.Errorf("%s: %s, want %s", metric, got, want)
		}
	}
	if m := metricsNamed(t, c, "apiserver_flowcontrol_seat_fair_frac"); len(m) != 1 || m[0].GetGauge().GetValue() != 0.75 {
		t.Errorf("apiserver_flowcontrol_seat_fair_frac %v, want 0.75", m)
	}

	b.releaseAll()
	for range 20 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request: %d", code)
		}
	}
	clock.Step(DefaultBorrowingPeriod)
	adjust(c)
	if busy := limitOf(c, "busy"); busy != 15 {
		t.Errorf("a period after the burst: busy has %d seats, want 15 still (its smoothed demand 0.977*20)", busy)
	}
}

// gatherAll gathers every family of the controller's metrics, as a scrape would.
func gatherAll(t *testing.T, c *Controller) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// metricsNamed gathers the controller's metrics of one family: its series.
func metricsNamed(t *testing.T, c *Controller, name string) []*dto.Metric {
	t.Helper()
	for _, f := range gatherAll(t, c) {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// matching are the series of the family with the given label values (name, value,
// ...).
func matching(t *testing.T, c *Controller, name string, labels ...string) []*dto.Metric {
	t.Helper()
	var out []*dto.Metric
	for _, m := range metricsNamed(t, c, name) {
		has := map[string]string{}
		for _, l := range m.GetLabel() {
			has[l.GetName()] = l.GetValue()
		}
		matches := true
		for i := 0; i+1 < len(labels); i += 2 {
			matches = matches && has[labels[i]] == labels[i+1]
		}
		if matches {
			out = append(out, m)
		}
	}
	return out
}

// seriesValue is the value of a gauge's one series with the given labels (NaN if
// there is none).
func seriesValue(t *testing.T, c *Controller, name string, labels ...string) float64 {
	t.Helper()
	m := matching(t, c, name, labels...)
	if len(m) != 1 {
		return math.NaN()
	}
	return m[0].GetGauge().GetValue()
}

// histogramSum is the sum of a histogram's observations over its series with the
// given labels.
func histogramSum(t *testing.T, c *Controller, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, m := range matching(t, c, name, labels...) {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum
}

// gaugeValues reads a per-level gauge as "level value ..." in name order.
func gaugeValues(t *testing.T, c *Controller, name string) string {
	t.Helper()
	var out []string
	for _, m := range metricsNamed(t, c, name) {
		out = append(out, fmt.Sprintf("%s %v", m.GetLabel()[0].GetValue(), m.GetGauge().GetValue()))
	}
	return strings.Join(out, " ")
}

// setDemand makes the level's demand x seats from now on (as if x seats' worth of
// requests were executing and waiting).
func setDemand(c *Controller, clock *fakeclock.Clock, name string, x float64) {
	l := c.states[name]
	l.mu.Lock()
	defer l.mu.Unlock()
	l.demand.set(clock.Now(), x)
}

// Whatever the demand, each limited level's current limit stays within its bounds
// (never below what it may not lend), and they share the nominal total (602 seats
// with the default configuration), each rounded to a whole seat; when the exempt
// level's use leaves too little, every limited level falls to its lower bound.
func TestBorrowingBoundsAndTotal(t *testing.T) {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := upstreamDefaults(t, Options{Clock: clock.Now})
	limited := []string{"system", "node-high", "leader-election", "workload-high", "workload-low", "global-default", "catch-all"}
	for _, tc := range []struct {
		demands map[string]float64
		// borrowers get more than their nominal seats.
		borrowers []string
	}{
		{map[string]float64{}, nil},
		{map[string]float64{"workload-low": 1000}, []string{"workload-low"}},
		{map[string]float64{"global-default": 300, "catch-all": 300}, []string{"global-default", "catch-all"}},
		{map[string]float64{"system": 5, "node-high": 500, "leader-election": 1, "workload-high": 90, "workload-low": 40, "global-default": 3, "catch-all": 70}, []string{"node-high", "catch-all"}},
		{map[string]float64{"system": 74, "node-high": 98, "leader-election": 25, "workload-high": 98, "workload-low": 245, "global-default": 49, "catch-all": 13}, nil},
	} {
		demands := tc.demands
		for _, name := range limited {
			setDemand(c, clock, name, demands[name])
		}
		clock.Step(DefaultBorrowingPeriod)
		adjust(c)
		sum := 0
		for _, name := range limited {
			l := c.states[name]
			limit := limitOf(c, name)
			if limit < l.lower || limit > l.upper {
				t.Errorf("demand %v: %s has %d seats, outside [%d, %d]", demands, name, limit, l.lower, l.upper)
			}
			sum += limit
		}
		if math.Abs(float64(sum-602)) > float64(len(limited))/2 {
			t.Errorf("demand %v: the limited levels hold %d seats, want 602 (each rounded)", demands, sum)
		}
		for _, name := range tc.borrowers {
			if limitOf(c, name) <= c.states[name].nominal {
				t.Errorf("demand %v: %s, busy, has %d seats, no more than its nominal %d", demands, name, limitOf(c, name), c.states[name].nominal)
			}
		}
	}

	setDemand(c, clock, "exempt", 700)
	clock.Step(DefaultBorrowingPeriod)
	adjust(c)
	for _, name := range limited {
		if limit, lower := limitOf(c, name), c.states[name].lower; limit != lower {
			t.Errorf("exempt using 700 seats: %s has %d seats, want its lower bound %d", name, limit, lower)
		}
	}
	if exempt := limitOf(c, "exempt"); exempt != 700 {
		t.Errorf("the exempt level's limit is %d, want its high watermark 700", exempt)
	}
}

// allocate shares a total out in proportion to the targets, within each item's
// bounds, as upstream's computeConcurrencyAllocation.
func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total float64
		items []allocItem
		want  []float64
		err   bool
	}{
		{"no bound matters", 10, []allocItem{{0, 100, 1}, {0, 100, 3}}, []float64{2.5, 7.5}, false},
		{"an upper bound", 10, []allocItem{{0, 2, 1}, {0, 100, 1}}, []float64{2, 8}, false},
		{"a lower bound", 10, []allocItem{{6, 10, 6}, {0, 10, 10}}, []float64{6, 4}, false},
		{"a zero target takes a sliver", 10, []allocItem{{0, 20, 0}, {5, 20, 5}}, []float64{0.002, 9.998}, false},
		{"lower bounds fill the total", 10, []allocItem{{4, 8, 4}, {6, 8, 7}}, []float64{4, 6}, false},
		{"upper bounds fill the total", 10, []allocItem{{0, 4, 4}, {0, 6, 1}}, []float64{4, 6}, false},
		{"lower bounds beyond the total", 10, []allocItem{{6, 10, 6}, {6, 10, 6}}, nil, true},
		{"upper bounds short of the total", 10, []allocItem{{0, 4, 4}, {0, 5, 5}}, nil, true},
	} {
		got, _, err := allocate(tc.total, tc.items)
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v", tc.name, err)
			continue
		}
		for i := range tc.want {
			if math.Abs(got[i]-tc.want[i]) > 1e-6 {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// The demand statistics are the time-weighted average, deviation and high watermark
// of the period, and the smoothed envelope decays by 0.977 a period once idle.
func TestDemandStats(t *testing.T) {
	t0 := time.Unix(0, 0)
	var d demandIntegrator
	d.reset(t0)
	d.set(t0, 10)
	d.set(t0.Add(2*time.Second), 0) // 10 for 2 s, 0 for 8 s
	p := d.reset(t0.Add(10 * time.Second))
	if p.avg != 2 || p.stdDev != 4 || p.max != 10 {
		t.Errorf("period %+v, want average 2, deviation 4, high watermark 10", p)
	}
	var s demandStats
	s.update(p)
	if s.smoothed != 6 || s.highWatermark != 10 {
		t.Errorf("stats %+v, want smoothed 6 (the envelope), high watermark 10", s)
	}
	s.update(d.reset(t0.Add(20 * time.Second)))
	if math.Abs(s.smoothed-0.977*6) > 1e-9 || s.highWatermark != 0 {
		t.Errorf("after an idle period %+v, want smoothed %v, high watermark 0", s, 0.977*6)
	}
}

// apiserver_flowcontrol_demand_seats is upstream's timing histogram: for each level,
// the nanoseconds its seat demand (its requests executing and waiting) stood at each
// ratio to its current limit, or, while that is zero, to a tenth of the server's
// seats. 20 seats: busy (45 shares, lends none) has 18, catch-all 2, exempt none
// (so its ratio is over 2). Each case holds requests for 10 s of the fake clock.
func TestDemandSeatsHistogram(t *testing.T) {
	upstreamBuckets := []float64{0.2, 0.4, 0.6, 0.8, 1, 1.2, 1.4, 1.7, 2, 2.8, 4, 6}
	for _, tc := range []struct {
		name, user, level string
		held              int
		// executing and waiting are what the level holds; le is the first bucket
		// that holds the 10 s, ratio the demand's ratio over them.
		executing, waiting int
		le, ratio          float64
	}{
		{name: "idle", user: "busy", level: "busy", le: 0.2, ratio: 0},
		{name: "half the limit", user: "busy", level: "busy", held: 9, executing: 9, le: 0.6, ratio: 0.5},
		{name: "the limit", user: "busy", level: "busy", held: 18, executing: 18, le: 1, ratio: 1},
		{name: "waiting counts", user: "busy", level: "busy", held: 27, executing: 18, waiting: 9, le: 1.7, ratio: 1.5},
		{name: "exempt over a tenth of the server", user: "admin", level: "exempt", held: 1, executing: 1, le: 0.6, ratio: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock, b := busyLevelServer(t)
			for range tc.held {
				go b.get(tc.user, "")
			}
			waitFor(t, "the requests held", func() bool {
				executing, waiting, _ := c.states[tc.level].counts()
				return executing == tc.executing && waiting == tc.waiting
			})
			clock.Step(10 * time.Second)

			m := matching(t, c, "apiserver_flowcontrol_demand_seats", "priority_level", tc.level)
			if len(m) != 1 {
				t.Fatalf("%d series of demand_seats{priority_level=%q}, want 1", len(m), tc.level)
			}
			if labels := m[0].GetLabel(); len(labels) != 1 || labels[0].GetName() != "priority_level" {
				t.Errorf("labels %v, want priority_level only", labels)
			}
			h := m[0].GetHistogram()
			const period = uint64(10 * time.Second)
			if h.GetSampleCount() != period || h.GetSampleSum() != tc.ratio*float64(period) {
				t.Errorf("count %d, sum %v; want %d ns at %v: sum %v", h.GetSampleCount(), h.GetSampleSum(), period, tc.ratio, tc.ratio*float64(period))
			}
			var bounds []float64
			for _, bucket := range h.GetBucket() {
				bounds = append(bounds, bucket.GetUpperBound())
				want := uint64(0)
				if bucket.GetUpperBound() >= tc.le {
					want = period
				}
				if bucket.GetCumulativeCount() != want {
					t.Errorf("bucket le=%v holds %d ns, want %d", bucket.GetUpperBound(), bucket.GetCumulativeCount(), want)
				}
			}
			if !slices.Equal(bounds, upstreamBuckets) {
				t.Errorf("buckets %v, want upstream's %v", bounds, upstreamBuckets)
			}
		})
	}
}

// Upstream shows every per-level series of the borrowing adjustment for the exempt
// level too: its configured bounds, its demand, its current limit (what it used at
// the most), and a target, which, having none of its own, is the first limited
// level's (catch-all, by name, in upstream's default configuration: 13 of 600 seats).
func TestExemptLevelSeries(t *testing.T) {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := upstreamDefaults(t, Options{Clock: clock.Now})
	setDemand(c, clock, "exempt", 7)
	clock.Step(DefaultBorrowingPeriod)
	adjust(c)
	for _, tc := range []struct {
		metric string
		want   float64
	}{
		{"apiserver_flowcontrol_nominal_limit_seats", 0},
		{"apiserver_flowcontrol_lower_limit_seats", 0},
		{"apiserver_flowcontrol_upper_limit_seats", 600},
		{"apiserver_flowcontrol_current_limit_seats", 7},
		{"apiserver_flowcontrol_demand_seats_high_watermark", 7},
		{"apiserver_flowcontrol_demand_seats_average", 7},
		{"apiserver_flowcontrol_demand_seats_stdev", 0},
		{"apiserver_flowcontrol_demand_seats_smoothed", 7},
		{"apiserver_flowcontrol_target_seats", seriesValue(t, c, "apiserver_flowcontrol_target_seats", "priority_level", "catch-all")},
	} {
		if got := seriesValue(t, c, tc.metric, "priority_level", "exempt"); got != tc.want {
			t.Errorf("%s{priority_level=\"exempt\"}: %v, want %v", tc.metric, got, tc.want)
		}
	}
	if got := seriesValue(t, c, "apiserver_flowcontrol_target_seats", "priority_level", "catch-all"); got != 13 {
		t.Errorf("catch-all's target %v, want its 13 seats it never lends", got)
	}
	if m := matching(t, c, "apiserver_flowcontrol_demand_seats", "priority_level", "exempt"); len(m) != 1 {
		t.Errorf("%d demand_seats series for exempt, want 1", len(m))
	}
}

// busyLevelServer is a server of 20 seats with the level "busy" (45 shares, one
// queue of 50) that the group "busy" is sent to, a fake clock, and the users "busy"
// and "admin" (system:masters, exempt).
func busyLevelServer(t *testing.T) (*Controller, *fakeclock.Clock, *blockingServer) {
	t.Helper()
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 20, Clock: clock.Now})
	c.Replace(priorityLevels, []runtime.Object{lending(limitedLevel("busy", 45, 1, 1, 50), 0, nil)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("busy", "busy", flowcontrolv1.FlowDistinguisherMethodByUserType, "busy")})
	b := newBlockingServer(t, c, map[string]registry.User{
		"busy":  {Name: "busy", Groups: []string{"busy"}},
		"admin": {Name: "admin", Groups: []string{"system:masters"}},
	})
	return c, clock, b
}

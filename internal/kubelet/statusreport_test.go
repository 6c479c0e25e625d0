package kubelet

import (
	"testing"
	"time"
)

func TestStatusReportScheduleShiftsOnlyAfterAChange(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	draws := []float64{0, 0.9}
	s := &statusReportSchedule{frequency: 5 * time.Minute, random: func() float64 {
		d := draws[0]
		draws = draws[1:]
		return d
	}}
	// Registration: a draw of 0 brings the first report to half the frequency.
	s.posted(start, false)
	if s.due(start.Add(2*time.Minute + 29*time.Second)) {
		t.Fatal("due before 2m30s after registration with the earliest offset")
	}
	first := start.Add(2*time.Minute + 30*time.Second)
	if !s.due(first) {
		t.Fatal("not due 2m30s after registration with the earliest offset")
	}
	// A periodic report: the next comes after exactly the frequency.
	s.posted(first, true)
	if s.due(first.Add(5*time.Minute-time.Second)) || !s.due(first.Add(5*time.Minute)) {
		t.Fatal("after a periodic report the next is not due at exactly the frequency")
	}
	// A change: the next periodic report is shifted again (0.9 → +2 minutes).
	changed := first.Add(time.Minute)
	s.posted(changed, false)
	if s.due(changed.Add(7*time.Minute-time.Second)) || !s.due(changed.Add(7*time.Minute)) {
		t.Fatal("after a change the next report is not shifted by the drawn offset")
	}
}

// Kubelets registered in the same second must not all report in the same second five
// minutes later.
func TestStatusReportsOfNodesStartedTogetherSpread(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perMinute := map[int]int{}
	for range 1000 {
		s := newStatusReportSchedule(5*time.Minute, start)
		for tick := start; ; tick = tick.Add(10 * time.Second) {
			if s.due(tick) {
				perMinute[int(tick.Sub(start)/time.Minute)]++
				break
			}
		}
	}
	if len(perMinute) < 5 {
		t.Fatalf("1,000 nodes' first reports fell in %d distinct minutes, want the five from 2m30s to 7m30s: %v", len(perMinute), perMinute)
	}
	for minute, n := range perMinute {
		if n > 400 {
			t.Fatalf("%d of 1,000 nodes report in minute %d: %v", n, minute, perMinute)
		}
	}
}

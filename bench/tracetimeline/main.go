// Command tracetimeline prints a timeline of a Go execution trace (such as the ones
// bench/density takes with -profile-dir at a startup stall), one line per interval: how
// many goroutines ran and waited runnable on average, how many waited, the share of the
// interval the GC was marking, the time the world was stopped, and what the waiting
// goroutines waited on most (goroutine-seconds; "unknown" for goroutines blocked since
// before the trace started).
//
//	go run ./bench/tracetimeline [-step 250ms] TRACE
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// interval sums what happened in one step of the timeline.
type interval struct {
	running, runnable, waiting time.Duration // goroutine-time in each state
	marking, stopped           time.Duration
	waitReasons                map[string]time.Duration
}

// timeline spreads durations over fixed steps from the trace's first event.
type timeline struct {
	start     trace.Time
	step      time.Duration
	intervals []*interval
}

func (t *timeline) at(i int) *interval {
	for len(t.intervals) <= i {
		t.intervals = append(t.intervals, &interval{waitReasons: map[string]time.Duration{}})
	}
	return t.intervals[i]
}

// add gives each interval that [from, to) overlaps its part of the span.
func (t *timeline) add(from, to trace.Time, fn func(*interval, time.Duration)) {
	for s := from; s < to; {
		i := int(time.Duration(s-t.start) / t.step)
		e := min(to, t.start+trace.Time(time.Duration(i+1)*t.step))
		fn(t.at(i), time.Duration(e-s))
		s = e
	}
}

type goroutine struct {
	state  trace.GoState
	since  trace.Time
	reason string
}

// account adds g's time in its state, from when it entered it until until.
func (t *timeline) account(g *goroutine, until trace.Time) {
	t.add(g.since, until, func(in *interval, d time.Duration) {
		switch g.state {
		case trace.GoRunning:
			in.running += d
		case trace.GoRunnable:
			in.runnable += d
		case trace.GoWaiting:
			in.waiting += d
			in.waitReasons[g.reason] += d
		}
	})
}

func main() {
	step := flag.Duration("step", 250*time.Millisecond, "length of one line of the timeline")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracetimeline [-step D] TRACE")
		os.Exit(2)
	}
	t, err := read(flag.Arg(0), *step)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	print(t)
}

func read(path string, step time.Duration) (*timeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, err
	}
	t := &timeline{step: step}
	goroutines := map[trace.GoID]*goroutine{}
	rangeStarts := map[string]trace.Time{}
	var last trace.Time
	for first := true; ; first = false {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			// The goroutines' states at the end last until the trace's last event.
			for _, g := range goroutines {
				t.account(g, last)
			}
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		if first {
			t.start = ev.Time()
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			if g := goroutines[id]; g != nil {
				t.account(g, ev.Time())
			}
			_, to := st.Goroutine()
			reason := st.Reason
			if reason == "" {
				reason = "unknown"
			}
			goroutines[id] = &goroutine{state: to, since: ev.Time(), reason: reason}
		case trace.EventRangeBegin:
			rangeStarts[ev.Range().Name] = ev.Time()
		case trace.EventRangeEnd:
			name := ev.Range().Name
			from, ok := rangeStarts[name]
			if !ok {
				continue
			}
			delete(rangeStarts, name)
			switch {
			case strings.HasPrefix(name, "stop-the-world"):
				t.add(from, ev.Time(), func(in *interval, d time.Duration) { in.stopped += d })
			case name == "GC concurrent mark phase":
				t.add(from, ev.Time(), func(in *interval, d time.Duration) { in.marking += d })
			}
		}
	}
}

func print(t *timeline) {
	sec := t.step.Seconds()
	fmt.Printf("%6s %8s %8s %8s %7s %8s  most waited on (goroutine-seconds)\n", "t (s)", "running", "runnable", "waiting", "marking", "stopped")
	for i, in := range t.intervals {
		type wait struct {
			reason string
			d      time.Duration
		}
		var waits []wait
		for r, d := range in.waitReasons {
			waits = append(waits, wait{r, d})
		}
		sort.Slice(waits, func(a, b int) bool { return waits[a].d > waits[b].d })
		var top []string
		for _, w := range waits[:min(3, len(waits))] {
			top = append(top, fmt.Sprintf("%s=%.0f", w.reason, w.d.Seconds()))
		}
		fmt.Printf("%6.2f %8.2f %8.2f %8.0f %7.2f %8s  %s\n", float64(i)*sec, in.running.Seconds()/sec, in.runnable.Seconds()/sec,
			in.waiting.Seconds()/sec, in.marking.Seconds()/sec, in.stopped.Round(time.Microsecond), strings.Join(top, " "))
	}
}

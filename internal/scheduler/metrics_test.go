package scheduler

import (
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"mizzen/internal/testing/freeport"
)

func TestMetricsExposition(t *testing.T) {
	env := startScheduler(t, nil, node("n1", 1000, 1024))
	env.createPod(pod("fits", 100, 0))
	env.createPod(pod("too-big", 5000, 0))
	env.waitScheduled("default", "fits")
	env.waitUnschedulable("default", "too-big")

	var body string
	if err := pollUntil(func() (bool, error) {
		rec := httptest.NewRecorder()
		env.sched.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		body = string(b)
		// The binding goroutine records "fits" after its API call returns, so the
		// test may see it bound before its metrics.
		return strings.Contains(body, `scheduler_pending_pods{queue="unschedulable"} 1`) &&
			strings.Contains(body, `scheduler_pod_scheduling_sli_duration_seconds_count`), nil
	}); err != nil {
		t.Fatalf("pending gauge never showed the parked pod, or the bound one was not recorded:\n%s", body)
	}
	// The parked pod may be retried once if the binding of "fits" arrived during its
	// attempt, so its count is at least 1.
	if !regexp.MustCompile(`scheduler_schedule_attempts_total\{profile="default-scheduler",result="unschedulable"\} [1-9]`).MatchString(body) {
		t.Errorf("metrics lack unschedulable attempts")
	}
	for _, want := range []string{
		`scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1`,
		`scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 1`,
		`scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1`,
		`scheduler_pending_pods{queue="active"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tt := range []struct {
		percentage int32
		nodes      int
		want       int
	}{
		{0, 50, 50},
		{0, 100, 100},   // 50% of 100 is raised to the 100-node floor
		{0, 1000, 420},  // 50 - 1000/125 = 42%
		{0, 5000, 500},  // 50 - 40 = 10%
		{0, 10000, 500}, // floor of 5%
		{30, 1000, 300},
		{100, 1000, 1000},
		{1, 1000, 100}, // at least 100 nodes
	} {
		got := numFeasibleNodesToFind(tt.percentage, tt.nodes)
		if got != tt.want {
			t.Errorf("percentage %d, %d nodes: got %d, want %d", tt.percentage, tt.nodes, got, tt.want)
		}
	}
}

// TestServeMetricsFreesItsPortOnStop: the server bundle runs the scheduler again after
// it loses its Lease, and that run listens on the same port; it must be free when the
// first run returns.
func TestServeMetricsFreesItsPortOnStop(t *testing.T) {
	env := startScheduler(t, nil)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Get(t)))
	for round := range 3 {
		stop, err := serveMetrics(addr, env.sched, slog.New(slog.NewTextHandler(io.Discard, nil)), make(chan error, 1))
		if err != nil {
			t.Fatalf("run %d: %v", round+1, err)
		}
		stop()
	}
}

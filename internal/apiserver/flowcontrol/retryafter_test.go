package flowcontrol

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/fakeclock"
)

// The Retry-After doubles while a level keeps refusing three requests a second per
// second of it, never within its own length of the last doubling, and comes down a
// second at a time once the refusals fall below one a second.
func TestRetryAfterGrowsAndDecays(t *testing.T) {
	var r retryAfter
	steps := []struct {
		sec  int64
		n    int // refusals in that second
		want int
	}{
		{100, 5, 1},  // nothing before: the initial second
		{101, 1, 2},  // 5 in the last second, at least 3: doubled
		{102, 6, 2},  // raised a second ago, within its 2 s: kept
		{103, 1, 4},  // 7 in the last 2 s, at least 6, 2 s after the raise: doubled
		{110, 1, 3},  // none in the last 4 s: down one
		{111, 1, 2},  // one in the last 3 s
		{112, 1, 2},  // two in the last 2 s: not fewer than one a second
		{120, 1, 1},  // none
		{121, 40, 1}, // the first of a second decides for all of it
	}
	for _, s := range steps {
		var got int
		for range s.n {
			got = r.refused(time.Unix(s.sec, 0))
		}
		if got != s.want {
			t.Errorf("at %d s after %d refusals: Retry-After %d, want %d", s.sec, s.n, got, s.want)
		}
	}
	highest := 0
	for sec := int64(200); sec < 400; sec++ {
		for range 200 {
			highest = max(highest, r.refused(time.Unix(sec, 0)))
		}
	}
	if highest != maxRetryAfterSeconds {
		t.Errorf("refusing 200 a second for 200 s: Retry-After at most %d, want it to reach %d", highest, maxRetryAfterSeconds)
	}
}

// A refused request's Retry-After is its level's: 1 at first, 2 once the level refused
// five requests in the second before.
func TestRefusalsCarryTheLevelsRetryAfter(t *testing.T) {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 1, Clock: clock.Now})
	tiny := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](1),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}},
	}}
	tiny.Name = "tiny"
	c.Replace(priorityLevels, []runtime.Object{tiny})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("tiny", "tiny", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})

	started, release := make(chan struct{}), make(chan struct{})
	inner := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		started <- struct{}{}
		<-release
	})
	describe := func(_ *http.Request, req *Request) bool {
		*req = *resourceRequest("someone", []string{"system:authenticated"}, "get", "", "pods", "", "default")
		return true
	}
	var retryAfters []int
	reject := func(w http.ResponseWriter, _ *http.Request, seconds int) {
		retryAfters = append(retryAfters, seconds)
		w.WriteHeader(http.StatusTooManyRequests)
	}
	h := c.Handler(inner, describe, reject)
	held := make(chan struct{})
	go func() {
		defer close(held)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	<-started // the level's one seat is taken
	defer func() { close(release); <-held }()

	refuse := func(n int) []int {
		retryAfters = nil
		for range n {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("a request beyond the level's seat: %d, want 429", rec.Code)
			}
		}
		return retryAfters
	}
	if got := refuse(5); len(got) != 5 || got[0] != 1 || got[4] != 1 {
		t.Errorf("the first second's refusals asked for %v s, want 1 each", got)
	}
	clock.Step(time.Second)
	if got := refuse(1); len(got) != 1 || got[0] != 2 {
		t.Errorf("after five refusals in a second, Retry-After %v, want 2", got)
	}
}

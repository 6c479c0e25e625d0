package maxinflight

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	testpoll "mizzen/internal/testing/poll"
)

// TestPoolsFillAndRefuse fills both pools with requests held in the handler: the next
// read and write are refused, a watch and system:masters are served, and once the held
// ones finish there is room again.
func TestPoolsFillAndRefuse(t *testing.T) {
	l := New(1, 2)
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.Collectors()...)
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.Header.Get("Hold") != "" {
			<-release
		}
	}), func(r *http.Request, req *Request) bool {
		req.Mutating = r.Method != http.MethodGet
		req.LongRunning = r.URL.Query().Get("watch") == "true"
		req.Privileged = r.Header.Get("Masters") != ""
		return true
	}, func(w http.ResponseWriter, r *http.Request, retryAfter int) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	do := func(method, target string, header ...string) int {
		req := httptest.NewRequest(method, target, nil)
		for _, k := range header {
			req.Header.Set(k, "yes")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var wg sync.WaitGroup
	// One read and two writes hold every slot.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		wg.Go(func() { do(m, "/api/v1/pods", "Hold") })
		<-entered
	}
	if got := inFlight(t, reg, "readOnly"); got != 1 {
		t.Errorf("read-only in flight %v, want 1", got)
	}
	if got := inFlight(t, reg, "mutating"); got != 2 {
		t.Errorf("mutating in flight %v, want 2", got)
	}
	for _, tt := range []struct {
		what, method, target string
		header               []string
		want                 int
	}{
		{"a read beyond the read pool", http.MethodGet, "/api/v1/pods", nil, http.StatusTooManyRequests},
		{"a write beyond the mutating pool", http.MethodDelete, "/api/v1/pods/x", nil, http.StatusTooManyRequests},
		{"a watch", http.MethodGet, "/api/v1/pods?watch=true", nil, http.StatusOK},
		{"system:masters beyond the pool", http.MethodGet, "/api/v1/pods", []string{"Masters"}, http.StatusOK},
	} {
		if got := do(tt.method, tt.target, tt.header...); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.what, got, tt.want)
		}
	}
	close(release)
	wg.Wait()
	if got := do(http.MethodGet, "/api/v1/pods"); got != http.StatusOK {
		t.Errorf("a read once the slots are free: %d, want 200", got)
	}
	if got := inFlight(t, reg, "readOnly") + inFlight(t, reg, "mutating"); got != 0 {
		t.Errorf("%v requests still counted in flight after all finished", got)
	}
}

func TestNoLimits(t *testing.T) {
	if New(0, 0) != nil {
		t.Error("New(0, 0) is a limiter; want none: both limits off")
	}
	l := New(0, 1) // reads unlimited
	var served int
	var mu sync.Mutex
	release := make(chan struct{})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		<-release
	}), func(r *http.Request, req *Request) bool { return true }, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusTooManyRequests)
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("read refused with %d; reads are unlimited", rec.Code)
			}
		})
	}
	testpoll.Until(t, "50 reads served at once", 10*time.Second, time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return served == 50
	})
	close(release)
	wg.Wait()
}

// inFlight reads apiserver_current_inflight_requests{request_kind=kind} from reg.
func inFlight(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "apiserver_current_inflight_requests" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "request_kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no apiserver_current_inflight_requests{request_kind=%q}", kind)
	return 0
}

package maxinflight

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"mizzen/internal/testing/fakeclock"
	testpoll "mizzen/internal/testing/poll"
)

// TestPoolsFillAndRefuse fills both pools with requests held in the handler: the next
// read and write are refused, a watch and system:masters are served, and once the held
// ones finish there is room again.
func TestPoolsFillAndRefuse(t *testing.T) {
	l := New(1, 2, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.Collectors()...)
	s := newHoldingServer(l)
	var wg sync.WaitGroup
	// One read and two writes hold every slot.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		wg.Go(func() { s.do(m, "/api/v1/pods", "Hold") })
		<-s.entered
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
		if got := s.do(tt.method, tt.target, tt.header...); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.what, got, tt.want)
		}
	}
	close(s.release)
	wg.Wait()
	if got := s.do(http.MethodGet, "/api/v1/pods"); got != http.StatusOK {
		t.Errorf("a read once the slots are free: %d, want 200", got)
	}
	if got := inFlight(t, reg, "readOnly") + inFlight(t, reg, "mutating"); got != 0 {
		t.Errorf("%v requests still counted in flight after all finished", got)
	}
}

// With priority and fairness off, upstream's max-in-flight filter feeds priority and
// fairness's read_vs_write_current_requests: each kind's slots in use over its limit,
// in the executing phase (nothing waits, so there is no waiting series). 2 read and 4
// write slots: two reads and three writes are held for 10 s of the fake clock, then
// nothing for 10 s; a watch and system:masters beyond the limit take no slot.
func TestReadVsWriteSeries(t *testing.T) {
	const name = "apiserver_flowcontrol_read_vs_write_current_requests"
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	l := New(2, 4, clock.Now)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(l.Collectors()...)
	s := newHoldingServer(l)
	var wg sync.WaitGroup
	for _, m := range []string{http.MethodGet, http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		wg.Go(func() { s.do(m, "/api/v1/pods", "Hold") })
		<-s.entered
	}
	for _, header := range [][]string{{"Masters"}, nil} {
		target := "/api/v1/pods"
		if header == nil {
			target += "?watch=true"
		}
		if code := s.do(http.MethodGet, target, header...); code != http.StatusOK {
			t.Fatalf("GET %s %v: %d", target, header, code)
		}
	}
	clock.Step(10 * time.Second)
	close(s.release)
	wg.Wait()
	clock.Step(10 * time.Second)

	series := gather(t, reg, name)
	if len(series) != 2 {
		t.Errorf("%d series of %s, want the executing phase's two", len(series), name)
	}
	const ten = uint64(10 * time.Second)
	for _, tc := range []struct {
		kind  string
		ratio float64
	}{{"readOnly", 1}, {"mutating", 0.75}} {
		h := series[`phase="executing",request_kind="`+tc.kind+`"`].GetHistogram()
		if h == nil {
			t.Errorf("no executing %s series", tc.kind)
			continue
		}
		if want := tc.ratio * float64(ten); h.GetSampleCount() != 2*ten || h.GetSampleSum() != want {
			t.Errorf("%s: count %d, sum %v; want %d ns, %v: 10 s at %v, 10 s at 0", tc.kind, h.GetSampleCount(), h.GetSampleSum(), 2*ten, want, tc.ratio)
		}
		for _, b := range h.GetBucket() {
			want := ten
			if b.GetUpperBound() >= tc.ratio {
				want = 2 * ten
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("%s: bucket le=%v holds %d ns, want %d", tc.kind, b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}
}

// gather is the family's series in reg by their labels (name="value",...).
func gather(t *testing.T, reg *prometheus.Registry, name string) map[string]*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out[strings.Join(labels, ",")] = m
		}
	}
	return out
}

// holdingServer serves requests through a limiter: a GET reads and any other method
// writes, ?watch=true is long-running, a Masters header is system:masters, and a Hold
// header keeps the request in the handler until release is closed (entered says it
// got there).
type holdingServer struct {
	h                http.Handler
	entered, release chan struct{}
}

func newHoldingServer(l *Limiter) *holdingServer {
	s := &holdingServer{entered: make(chan struct{}, 10), release: make(chan struct{})}
	s.h = l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		if r.Header.Get("Hold") != "" {
			<-s.release
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
	return s
}

// do serves a request with the given headers set, and returns its status code.
func (s *holdingServer) do(method, target string, header ...string) int {
	req := httptest.NewRequest(method, target, nil)
	for _, k := range header {
		req.Header.Set(k, "yes")
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec.Code
}

func TestNoLimits(t *testing.T) {
	if New(0, 0, nil) != nil {
		t.Error("New(0, 0) is a limiter; want none: both limits off")
	}
	l := New(0, 1, nil) // reads unlimited
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

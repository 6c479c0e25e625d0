package flowcontrol

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A watch holds a seat while it sends its initial events, as upstream's, and none
// afterwards: on a level of one seat, a get waits while a watch is initialized, runs
// as soon as the watch says it is, and a later get runs at once beside the watch still
// open. An exec (long-running, not a watch) takes no seat at all.
func TestWatchHoldsASeatUntilInitialized(t *testing.T) {
	c := New(Options{ServerSeats: 6}) // the level's share: 1 of 6 (catch-all has 5)
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 1, 1, 10)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("s", "one", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	l := c.states["one"]
	if _, _, limit := l.counts(); limit != 1 {
		t.Fatalf("the level has %d seats, want 1", limit)
	}

	initialized, endWatch, endExec := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	started := map[string]int{}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := r.Header.Get("Verb")
		mu.Lock()
		started[verb]++
		mu.Unlock()
		switch verb {
		case "watch":
			<-initialized // sending the initial events
			WatchInitialized(r.Context())
			<-endWatch
		case "exec":
			<-endExec
		}
	})
	describe := func(r *http.Request, req *Request) bool {
		*req = *resourceRequest("alice", []string{"system:authenticated"}, r.Header.Get("Verb"), "", "pods", "", "default")
		if req.Verb == "exec" {
			req.Verb, req.Subresource, req.LongRunning = "create", "exec", true
		}
		req.LongRunning = req.LongRunning || req.Verb == "watch"
		return true
	}
	srv := httptest.NewServer(c.Handler(inner, describe, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	var closeOnce sync.Once
	closeAll := func() {
		closeOnce.Do(func() {
			for _, ch := range []chan struct{}{initialized, endWatch, endExec} {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
		})
	}
	defer closeAll()
	send := func(verb string) chan int { return sendAsync(srv.URL, "Verb", verb) }
	startedBy := func(verb string) int {
		mu.Lock()
		defer mu.Unlock()
		return started[verb]
	}

	exec := send("exec")
	waitFor(t, "the exec running", func() bool { return startedBy("exec") == 1 })
	if executing, _, _ := l.counts(); executing != 0 {
		t.Errorf("an exec holds a seat: %d executing", executing)
	}
	watch := send("watch")
	waitFor(t, "the watch initializing", func() bool { return startedBy("watch") == 1 })
	if executing, _, _ := l.counts(); executing != 1 {
		t.Errorf("a watch initializing: %d executing, want 1", executing)
	}
	get := send("get")
	waitFor(t, "the get waiting", func() bool { _, waiting, _ := l.counts(); return waiting == 1 })
	if startedBy("get") != 0 {
		t.Fatal("the get ran while the watch held the one seat")
	}
	close(initialized)
	if code := <-get; code != http.StatusOK {
		t.Errorf("the get after the watch's initialization: %d", code)
	}
	// The watch is still open and holds nothing: another get runs at once.
	if code := <-send("get"); code != http.StatusOK || startedBy("get") != 2 {
		t.Errorf("a get beside an established watch: %d", code)
	}
	if executing, waiting, _ := l.counts(); executing != 0 || waiting != 0 {
		t.Errorf("with the watch established: %d executing, %d waiting, want none", executing, waiting)
	}
	closeAll()
	for _, ch := range []chan int{watch, exec} {
		if code := <-ch; code != http.StatusOK {
			t.Errorf("%d", code)
		}
	}
}

// A watch whose handler ends before it says it is initialized (an error) frees its
// seat as it returns.
func TestWatchSeatFreedWhenHandlerReturns(t *testing.T) {
	c := New(Options{ServerSeats: 6})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 1, 1, 10)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("s", "one", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(_ *http.Request, req *Request) bool {
		*req = *resourceRequest("alice", []string{"system:authenticated"}, "watch", "", "pods", "", "default")
		req.LongRunning = true
		return true
	}, func(http.ResponseWriter, *http.Request, int) { t.Error("rejected") })
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	if executing, waiting, _ := c.states["one"].counts(); executing != 0 || waiting != 0 {
		t.Errorf("%d executing, %d waiting, want none", executing, waiting)
	}
}

// Upstream's filter passes long-running requests other than watches on before it
// classifies them: their responses carry no priority-and-fairness headers. A watch's
// and a get's do.
func TestOnlyWatchesOfLongRunningRequestsAreClassified(t *testing.T) {
	c := upstreamDefaults(t, Options{})
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(r *http.Request, req *Request) bool {
		*req = *resourceRequest("alice", []string{"system:authenticated"}, r.Header.Get("Verb"), "", "pods", r.Header.Get("Sub"), "default")
		req.LongRunning = req.Verb == "watch" || req.Subresource != ""
		return true
	}, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusTooManyRequests) })
	for _, tc := range []struct {
		verb, sub  string
		classified bool
	}{{"get", "", true}, {"watch", "", true}, {"create", "exec", false}, {"get", "log", false}, {"get", "proxy", false}} {
		r := httptest.NewRequest("GET", "/api/v1/namespaces/default/pods", nil)
		r.Header.Set("Verb", tc.verb)
		r.Header.Set("Sub", tc.sub)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fs, pl := rec.Header().Get(HeaderFlowSchemaUID), rec.Header().Get(HeaderPriorityLevelUID)
		if (fs != "") != tc.classified || (pl != "") != tc.classified {
			t.Errorf("%s %s: headers %v, want classified %v", tc.verb, tc.sub, rec.Header(), tc.classified)
		}
	}
}

// sendAsync GETs url with the given header names and values, and sends its status code
// (0 when the request failed) on the channel it returns once the response has come.
func sendAsync(url string, headers ...string) chan int {
	code := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			code <- 0
			return
		}
		resp.Body.Close()
		code <- resp.StatusCode
	}()
	return code
}

package flowcontrol

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

// A list's seats follow upstream's size-based estimate: 100 kB a seat of what it is
// expected to hold, at most 1 MB for what the watch cache serves, every object for
// what storage serves with a selector, one for a named object.
func TestListSeats(t *testing.T) {
	for _, tc := range []struct {
		name         string
		count, bytes int64
		counted      bool
		query        string
		want         int
	}{
		{"from the cache, capped at 1 MB", 5000, 2000, true, "", 10},
		{"from the cache, small", 40, 2000, true, "", 1},
		{"from the cache, 250 kB", 100, 2500, true, "resourceVersion=0", 3},
		{"a page from the cache", 5000, 2000, true, "limit=100", 2},
		{"an exact resourceVersion reads storage", 5000, 2000, true, "resourceVersionMatch=Exact&resourceVersion=5", 100},
		{"a page at a resourceVersion reads storage", 5000, 2000, true, "limit=250&resourceVersion=7", 5},
		{"a continuation reads storage", 300, 2000, true, "continue=abc", 6},
		{"storage with a selector reads half the objects at least", 5000, 2000, true, "limit=100&continue=abc&labelSelector=a%3Db", 50},
		{"NotOlderThan reads the cache", 5000, 2000, true, "resourceVersionMatch=NotOlderThan&resourceVersion=5", 10},
		{"one named object", 5000, 200_000, true, "fieldSelector=metadata.name%3Dx&resourceVersionMatch=Exact&resourceVersion=5", 2},
		{"not counted", 5000, 2000, false, "", 1},
		{"nothing stored", 0, 0, true, "", 1},
		{"sizes unknown", 10, 0, true, "resourceVersionMatch=Exact&resourceVersion=5", 100},
		{"options that do not parse", 1, 10, true, "limit=many", 100},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := ListSeats(tc.count, tc.bytes, tc.counted, q); got != tc.want {
			t.Errorf("%s: %d seats, want %d", tc.name, got, tc.want)
		}
	}
}

// A request of the default levels takes at most 15% of its level's nominal seats, no
// more than its nominal seats over its hand size; those of the levels that do not
// queue (exempt, catch-all) up to 100.
func TestLevelMaxSeats(t *testing.T) {
	c := upstreamDefaults(t, Options{})
	for name, want := range map[string]int{"global-default": 8, "workload-low": 37, "workload-high": 15, "catch-all": 100, "leader-election": 4, "exempt": 100} {
		if got := c.states[name].seatsFor(1000); got != want {
			t.Errorf("%s: a request takes at most %d seats, want %d", name, got, want)
		}
	}
}

// A list estimated at 10 seats takes its level's maximum, 3 of the level's 19: six
// run at once, the seventh waits for seats (and a one-seat request behind it waits
// its turn); the dump shows each list's 3 seats and /metrics their estimate.
func TestListTakesItsSeats(t *testing.T) {
	c := New(Options{ServerSeats: 20})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("lists", 95, 1, 1, 10)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("lists", "lists", flowcontrolv1.FlowDistinguisherMethodByUserType, "listers")})
	if got := limitOf(c, "lists"); got != 19 {
		t.Fatalf("the level has %d seats, want 19", got)
	}
	b := newBlockingServer(t, c, map[string]registry.User{"lister": {Name: "lister", Groups: []string{"listers"}}})
	codes := make(chan int, 8)
	for range 7 {
		go func() { codes <- b.getSeats("lister", "", 10) }()
	}
	waitFor(t, "6 lists running and one waiting", func() bool {
		executing, waiting, _ := c.states["lists"].counts()
		return executing == 6 && waiting == 1 && b.startedBy("lister") == 6
	})
	go func() { codes <- b.getSeats("lister", "", 1) }()
	waitFor(t, "a one-seat request waiting too", func() bool { _, waiting, _ := c.states["lists"].counts(); return waiting == 2 })
	var seats []string
	for _, r := range rowsOf(dump(t, c, "dump_requests", requestHeader...), "lists") {
		seats = append(seats, r[6])
	}
	slices.Sort(seats)
	if want := []string{"1", "3", "3", "3", "3", "3", "3", "3"}; !slices.Equal(seats, want) {
		t.Errorf("the requests' seats %v, want %v", seats, want)
	}
	if got := rowsOf(dump(t, c, "dump_queues", queueHeader...), "lists"); len(got) != 1 || got[0][4] != "18" || got[0][6] != "4" {
		t.Errorf("the queue %q, want 18 seats in use and 4 waiting", got)
	}
	b.releaseAll()
	for range 8 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request: %d", code)
		}
	}
	if got := histogramSum(t, c, "apiserver_flowcontrol_work_estimated_seats"); got != 22 {
		t.Errorf("estimated seats sum to %v, want 22", got)
	}
}

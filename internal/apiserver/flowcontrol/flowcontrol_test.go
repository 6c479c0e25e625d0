package flowcontrol

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"mizzen/internal/registry"
	registryflowcontrol "mizzen/internal/registry/flowcontrol"
	"mizzen/internal/testing/fakeclock"
	"mizzen/internal/testing/poll"
)

// upstreamDefaults is a controller fed the configuration every cluster starts with.
func upstreamDefaults(t *testing.T, opts Options) *Controller {
	t.Helper()
	c := New(opts)
	var schemas, levels []runtime.Object
	for i, obj := range registryflowcontrol.InitialConfiguration() {
		switch o := obj.(type) {
		case *flowcontrolv1.FlowSchema:
			o.UID = types.UID(fmt.Sprintf("fs-%d-%s", i, o.Name))
			schemas = append(schemas, o)
		case *flowcontrolv1.PriorityLevelConfiguration:
			o.UID = types.UID(fmt.Sprintf("pl-%d-%s", i, o.Name))
			levels = append(levels, o)
		}
	}
	c.Replace(flowSchemas, schemas)
	c.Replace(priorityLevels, levels)
	return c
}

func resourceRequest(user string, groups []string, verb, group, resource, sub, ns string) *Request {
	return &Request{User: registry.User{Name: user, Groups: groups}, ResourceRequest: true,
		Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns}
}

// The default configuration sends each kind of client where upstream's does.
func TestClassifiesAsUpstreamsDefaults(t *testing.T) {
	c := upstreamDefaults(t, Options{})
	authenticated := "system:authenticated"
	nodes := []string{"system:nodes", authenticated}
	for _, tc := range []struct {
		req          *Request
		schema, want string
	}{
		{resourceRequest("system:admin", []string{"system:masters", authenticated}, "create", "", "pods", "", "default"), "exempt", "exempt"},
		{resourceRequest("system:node:n1", nodes, "update", "coordination.k8s.io", "leases", "", "kube-node-lease"), "system-node-high", "node-high"},
		{resourceRequest("system:node:n1", nodes, "update", "", "nodes", "status", ""), "system-node-high", "node-high"},
		{resourceRequest("system:node:n1", nodes, "update", "", "pods", "status", "default"), "system-nodes", "system"},
		{resourceRequest("system:kube-controller-manager", []string{authenticated}, "get", "coordination.k8s.io", "leases", "", "kube-system"), "system-leader-election", "leader-election"},
		{resourceRequest("system:kube-controller-manager", []string{authenticated}, "delete", "", "pods", "", "default"), "kube-controller-manager", "workload-high"},
		{resourceRequest("system:serviceaccount:kube-system:generic-garbage-collector", []string{"system:serviceaccounts", authenticated}, "delete", "", "pods", "", "default"), "kube-system-service-accounts", "workload-high"},
		{resourceRequest("system:serviceaccount:apps:robot", []string{"system:serviceaccounts", authenticated}, "list", "", "pods", "", "apps"), "service-accounts", "workload-low"},
		{resourceRequest("alice", []string{authenticated}, "list", "", "pods", "", ""), "global-default", "global-default"},
		{&Request{User: registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, Verb: "get", Path: "/readyz"}, "probes", "exempt"},
		{&Request{User: registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, Verb: "get", Path: "/healthz/etcd"}, "probes", "exempt"},
		{&Request{User: registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, Verb: "get", Path: "/version"}, "global-default", "global-default"},
	} {
		s, _ := c.classify(tc.req)
		if s == nil || s.name != tc.schema || s.level.name != tc.want {
			got := "nothing"
			if s != nil {
				got = s.name + " -> " + s.level.name
			}
			t.Errorf("%s %s %s/%s: %s, want %s -> %s", tc.req.User.Name, tc.req.Verb, tc.req.Resource, tc.req.Subresource, got, tc.schema, tc.want)
		}
	}
}

// Seats are shared out by nominalConcurrencyShares, rounded up, as upstream does:
// 600 seats, shares summing to 245; lendablePercent sets each level's lower bound.
// Before any demand was seen, upstream's adjustment shares the 602 nominal seats in
// proportion to the lower bounds, and so does this.
func TestNominalSeats(t *testing.T) {
	c := upstreamDefaults(t, Options{})
	for name, want := range map[string][3]int{
		"system": {74, 50, 117}, "node-high": {98, 73, 170}, "leader-election": {25, 25, 58},
		"workload-high": {98, 49, 114}, "workload-low": {245, 24, 56}, "global-default": {49, 24, 56}, "catch-all": {13, 13, 30},
	} {
		l := c.states[name]
		_, _, limit := l.counts()
		if got := [3]int{l.nominal, l.lower, limit}; got != want {
			t.Errorf("%s: nominal, lower and current seats %v, want %v", name, got, want)
		}
	}
}

// A schema naming a level that does not exist matches nothing, and says so in its
// Dangling condition; the level's creation makes it match.
func TestDanglingSchema(t *testing.T) {
	var mu sync.Mutex
	written := map[string]flowcontrolv1.FlowSchemaCondition{}
	c := upstreamDefaults(t, Options{WriteDangling: func(_ context.Context, name string, cond flowcontrolv1.FlowSchemaCondition) error {
		mu.Lock()
		defer mu.Unlock()
		written[name] = cond
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.RunStatus(ctx)

	fs := &flowcontrolv1.FlowSchema{Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "robots"},
		MatchingPrecedence:         50,
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "robot"}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
		}},
	}}
	fs.Name = "robots"
	c.Apply(fs, false)
	robot := resourceRequest("robot", []string{"system:authenticated"}, "get", "", "pods", "", "default")
	if s, _ := c.classify(robot); s.name != "global-default" {
		t.Errorf("dangling schema: classified as %s, want global-default", s.name)
	}
	waitCondition := func(status flowcontrolv1.ConditionStatus, reason, message string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			cond, ok := written["robots"]
			mu.Unlock()
			if ok && cond.Status == status && cond.Reason == reason && cond.Message == message {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("condition %+v, want %s %s %q", cond, status, reason, message)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitCondition(flowcontrolv1.ConditionTrue, "NotFound", `This FlowSchema references the PriorityLevelConfiguration object named "robots" but there is no such object`)

	pl := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](5),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}},
	}}
	pl.Name = "robots"
	c.Apply(pl, false)
	if s, _ := c.classify(robot); s.name != "robots" || s.level.name != "robots" {
		t.Errorf("classified as %s -> %s, want robots -> robots", s.name, s.level.name)
	}
	waitCondition(flowcontrolv1.ConditionFalse, "Found", `This FlowSchema references the PriorityLevelConfiguration object named "robots" and it exists`)
}

// blockingServer runs the filter in front of a handler that holds every request
// until release is closed, and counts those it started.
type blockingServer struct {
	srv       *httptest.Server
	release   chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	started   map[string]int
}

func newBlockingServer(t *testing.T, c *Controller, users map[string]registry.User) *blockingServer {
	b := &blockingServer{release: make(chan struct{}), started: map[string]int{}}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.started[r.Header.Get("User")]++
		b.mu.Unlock()
		<-b.release
	})
	describe := func(r *http.Request, req *Request) bool {
		u := users[r.Header.Get("User")]
		verb := r.Header.Get("Verb")
		if verb == "" {
			verb = "get"
		}
		*req = *resourceRequest(u.Name, u.Groups, verb, "", "pods", "", r.Header.Get("Namespace"))
		req.Seats, _ = strconv.Atoi(r.Header.Get("Seats"))
		return true
	}
	reject := func(w http.ResponseWriter, _ *http.Request, retryAfter int) {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
	}
	b.srv = httptest.NewServer(c.Handler(inner, describe, reject))
	t.Cleanup(b.srv.Close)
	t.Cleanup(b.releaseAll) // first: a failed test leaves requests held
	return b
}

func (b *blockingServer) releaseAll() { b.closeOnce.Do(func() { close(b.release) }) }

func (b *blockingServer) startedBy(user string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started[user]
}

// get sends a request as user and returns its answer's code.
func (b *blockingServer) get(user, namespace string) int {
	return b.getSeats(user, namespace, 0)
}

// getSeats is get of a request estimated at the given seats.
func (b *blockingServer) getSeats(user, namespace string, seats int) int {
	return b.send(user, "get", namespace, seats)
}

// send sends a request of the verb (as authorization sees it: get, create, watch,
// ...) estimated at the given seats, as user, and returns its answer's code.
func (b *blockingServer) send(user, verb, namespace string, seats int) int {
	req, _ := http.NewRequest("GET", b.srv.URL, nil)
	req.Header.Set("Verb", verb)
	req.Header.Set("User", user)
	req.Header.Set("Namespace", namespace)
	req.Header.Set("Seats", strconv.Itoa(seats))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func limitedLevel(name string, shares int32, queues, handSize, queueLength int32) *flowcontrolv1.PriorityLevelConfiguration {
	pl := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(shares),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: handSize, QueueLengthLimit: queueLength}}},
	}}
	pl.Name = name
	return pl
}

func schemaFor(name, level string, method flowcontrolv1.FlowDistinguisherMethodType, groups ...string) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
		MatchingPrecedence:         10,
		DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: method},
	}}
	fs.Name = name
	for _, g := range groups {
		fs.Spec.Rules = append(fs.Spec.Rules, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: g}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
		})
	}
	return fs
}

// A level runs at most its seats at once; the next requests wait in their flow's
// queue, those beyond the queue's length are turned away with 429, and a seat freed
// goes to a waiting request. Another level's requests meanwhile run at once.
func TestLevelQueuesAndRejects(t *testing.T) {
	// One level of 600 * 1/(1+244) -> 3 seats, one queue of 2.
	c := New(Options{ServerSeats: 600})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("small", 1, 1, 1, 2), limitedLevel("big", 244, 16, 4, 50)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("small", "small", flowcontrolv1.FlowDistinguisherMethodByUserType, "batch"),
		schemaFor("big", "big", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	if _, _, limit := c.states["small"].counts(); limit != 3 {
		t.Fatalf("small level has %d seats, want 3", limit)
	}
	users := map[string]registry.User{
		"batch": {Name: "batch", Groups: []string{"batch"}},
		"alice": {Name: "alice", Groups: []string{"system:authenticated"}},
	}
	b := newBlockingServer(t, c, users)
	codes := make(chan int, 10)
	for range 5 { // 3 run, 2 wait
		go func() { codes <- b.get("batch", "") }()
	}
	waitFor(t, "3 running and 2 queued", func() bool {
		executing, waiting, _ := c.states["small"].counts()
		return executing == 3 && waiting == 2 && b.startedBy("batch") == 3
	})
	if code := b.get("batch", ""); code != http.StatusTooManyRequests {
		t.Errorf("a sixth request with its queue full: %d, want 429", code)
	}
	// The other level is not held up.
	go func() { codes <- b.get("alice", "") }()
	waitFor(t, "alice's request running", func() bool { return b.startedBy("alice") == 1 })

	b.releaseAll()
	for range 6 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request that waited or ran: %d, want 200", code)
		}
	}
	if got := b.startedBy("batch"); got != 5 {
		t.Errorf("%d of batch's requests ran, want 5", got)
	}
	if executing, waiting, _ := c.states["small"].counts(); executing != 0 || waiting != 0 {
		t.Errorf("after all: %d executing, %d waiting", executing, waiting)
	}
}

// A request that waits longer than the wait limit is rejected and leaves its queue.
func TestWaitLimit(t *testing.T) {
	c := New(Options{ServerSeats: 1, WaitLimit: 50 * time.Millisecond})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 1, 1, 10)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("one", "one", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	b := newBlockingServer(t, c, map[string]registry.User{"bob": {Name: "bob", Groups: []string{"system:authenticated"}}})
	first := make(chan int, 1)
	go func() { first <- b.get("bob", "") }()
	waitFor(t, "the first request running", func() bool { return b.startedBy("bob") == 1 })
	if code := b.get("bob", ""); code != http.StatusTooManyRequests {
		t.Errorf("a request that waited past its limit: %d, want 429", code)
	}
	if _, waiting, _ := c.states["one"].counts(); waiting != 0 {
		t.Errorf("%d still waiting after the rejection", waiting)
	}
	// The dump counts it, as upstream's does, rejected and cancelled (its
	// TimedoutRequests stays 0), and the one running dispatched.
	if got, want := rowsOf(dump(t, c, "dump_priority_levels", levelHeader...), "one"), [][]string{{"one", "0", "false", "false", "0", "1", "1", "1", "0", "1"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the level's row %q, want %q", got, want)
	}
	b.releaseAll()
	if code := <-first; code != http.StatusOK {
		t.Errorf("first request: %d", code)
	}
}

// Fairness: a flow with many requests waiting does not hold up another flow of the
// same level that comes at the same (virtual) time: it finds a short queue in its hand
// and is served within a round of the queues.
func TestFlowsAreServedInTurn(t *testing.T) {
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 1, Clock: clock.Now})
	c.Replace(priorityLevels, []runtime.Object{limitedLevel("one", 1, 64, 6, 100)})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("ns", "one", flowcontrolv1.FlowDistinguisherMethodByNamespaceType, "system:authenticated")})
	l := c.states["one"]
	held := &request{}
	if _, reason := l.acquire(context.Background(), held, time.Minute, func() {}); reason != "" {
		t.Fatal(reason) // holds the level's one seat until released below
	}
	heavy, light := flowHash("ns", "heavy"), flowHash("ns", "light")
	order := make(chan string, 30)
	var wg sync.WaitGroup
	enqueue := func(name string, flow uint64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rq := &request{flow: flow}
			if _, reason := l.acquire(context.Background(), rq, time.Minute, func() {}); reason != "" {
				t.Errorf("rejected: %s", reason)
				return
			}
			order <- name
			clock.Step(time.Millisecond) // each request runs a millisecond
			l.release(rq)
		}()
	}
	for range 20 {
		enqueue("heavy", heavy)
	}
	waitFor(t, "heavy's requests queued", func() bool { _, w, _ := l.counts(); return w == 20 })
	enqueue("light", light)
	waitFor(t, "light's request queued", func() bool { _, w, _ := l.counts(); return w == 21 })
	l.release(held) // the held seat: the queues are now served one request at a time
	wg.Wait()
	close(order)
	position := 0
	for name := range order {
		position++
		if name == "light" {
			break
		}
	}
	// The heavy flow spread its requests over the 6 queues of its hand (each joins the
	// one with the least work waiting); all 7 queues started at the same virtual time,
	// so the light one's request runs within 7; first come, first served would have run
	// it 21st.
	if position > 7 {
		t.Errorf("the light flow's one request ran %d-th, after %d of the heavy flow's", position, position-1)
	}
}

// Shuffle sharding deals distinct queues, all of the deck, and spreads the flows
// over all of them.
func TestHandsAreDistinct(t *testing.T) {
	for _, deck := range []struct{ queues, hand int }{{64, 6}, {128, 8}, {1, 1}, {16, 4}, {500, 10}} {
		used := make([]int, deck.queues)
		for flow := range uint64(5000) {
			var hand []int
			dealHand(flowHash("s", fmt.Sprint(flow)), deck.queues, deck.hand, func(i int) { hand = append(hand, i) })
			if len(hand) != deck.hand {
				t.Fatalf("%d queues: a hand of %d, want %d", deck.queues, len(hand), deck.hand)
			}
			seen := map[int]bool{}
			for _, i := range hand {
				if i < 0 || i >= deck.queues || seen[i] {
					t.Fatalf("%d queues, flow %d: hand %v", deck.queues, flow, hand)
				}
				seen[i] = true
				used[i]++
			}
		}
		for i, n := range used {
			if n == 0 {
				t.Errorf("%d queues: queue %d never dealt in 5000 hands", deck.queues, i)
			}
		}
	}
}

// counts reports the level's requests executing and waiting, and its seats.
func (l *level) counts() (executing, waiting, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executing, l.waiting, l.limit
}

// seatsHeld reports the seats the level's requests hold (executing, or keeping their
// final seats).
func (l *level) seatsHeld() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seatsInUse
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, 2*time.Millisecond, cond)
}

// dump fetches one of the debug dumps and returns its cells by line, after checking
// that it is upstream's table: a header row of the given columns, every line of as
// many comma-separated cells, each cell starting where the header's does.
func dump(t *testing.T, c *Controller, path string, header ...string) [][]string {
	t.Helper()
	rec := httptest.NewRecorder()
	if !c.ServeDebug(rec, httptest.NewRequest("GET", DebugPathPrefix+path, nil)) {
		t.Fatalf("%s: not served", path)
	}
	lines := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n")
	starts := func(line string) []int {
		s := []int{0}
		for i := 0; i+1 < len(line); i++ {
			if line[i] == ',' {
				j := i + 1
				for j < len(line) && line[j] == ' ' {
					j++
				}
				s = append(s, j)
			}
		}
		return s
	}
	var rows [][]string
	for i, line := range lines {
		cells := strings.Split(line, ",")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if len(cells) != len(header) {
			t.Fatalf("%s line %d: %d cells, want %d: %q", path, i, len(cells), len(header), line)
		}
		if !slices.Equal(starts(line), starts(lines[0])) {
			t.Errorf("%s line %d is not aligned with the header:\n%s\n%s", path, i, lines[0], line)
		}
		if i == 0 {
			if !slices.Equal(cells, header) {
				t.Fatalf("%s header %q, want %q", path, cells, header)
			}
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

// rowsOf are the rows whose first cell is the level's name.
func rowsOf(rows [][]string, level string) [][]string {
	var out [][]string
	for _, r := range rows {
		if r[0] == level {
			out = append(out, r)
		}
	}
	return out
}

var (
	levelHeader = []string{"PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
		"ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests"}
	queueHeader = []string{"PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse",
		"NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"}
	requestHeader = []string{"PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue",
		"FlowDistingsher", "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"}
	requestDetailHeader = append(slices.Clone(requestHeader), "UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource")
)

// The debug dumps show, in upstream's columns, what a level holds: with 3 seats taken
// and 2 requests waiting in its one queue, and a sixth turned away, the level's row,
// its queue's row and a row per request say so; a level deleted meanwhile stays,
// quiescing, until its requests are done.
func TestDebugDumps(t *testing.T) {
	// A clock that stands still: the queue's virtual time is then the work charged to
	// the requests started from it, 3 ms a seat each.
	clock := &fakeclock.Clock{T: time.Unix(1000, 0)}
	c := New(Options{ServerSeats: 600, Clock: clock.Now})
	small, big := limitedLevel("small", 1, 1, 1, 2), limitedLevel("big", 244, 16, 4, 50)
	c.Replace(priorityLevels, []runtime.Object{small, big})
	c.Replace(flowSchemas, []runtime.Object{schemaFor("batch", "small", flowcontrolv1.FlowDistinguisherMethodByUserType, "batch"),
		schemaFor("big", "big", flowcontrolv1.FlowDistinguisherMethodByUserType, "system:authenticated")})
	b := newBlockingServer(t, c, map[string]registry.User{"batch": {Name: "batch", Groups: []string{"batch"}}})
	codes := make(chan int, 5)
	for range 5 {
		go func() { codes <- b.get("batch", "default") }()
	}
	waitFor(t, "3 running and 2 queued", func() bool {
		executing, waiting, _ := c.states["small"].counts()
		return executing == 3 && waiting == 2 && b.startedBy("batch") == 3
	})
	if code := b.get("batch", "default"); code != http.StatusTooManyRequests {
		t.Fatalf("a sixth request: %d, want 429", code)
	}

	levels := dump(t, c, "dump_priority_levels", levelHeader...)
	if got, want := rowsOf(levels, "small"), [][]string{{"small", "1", "false", "false", "2", "3", "3", "1", "0", "0"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("small's row %q, want %q", got, want)
	}
	if got, want := rowsOf(levels, "big"), [][]string{{"big", "0", "true", "false", "0", "0", "0", "0", "0", "0"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("big's row %q, want %q", got, want)
	}
	queues := dump(t, c, "dump_queues", queueHeader...)
	if got, want := rowsOf(queues, "small"), [][]string{{"small", "0", "2", "3", "3", "0.00900000ss", "2", "2", "0.00600000ss"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("small's queues %q, want %q", got, want)
	}
	if n := len(rowsOf(queues, "big")); n != 16 {
		t.Errorf("big has %d queue rows, want 16", n)
	}
	requests := rowsOf(dump(t, c, "dump_requests", requestHeader...), "small")
	places := map[string]int{}
	for _, r := range requests {
		places[r[2]+"/"+r[3]]++
		// The level has one queue, so, as upstream's, no flow distinguisher is shown.
		if r[1] != "batch" || r[4] != "" || r[6] != "1" || r[7] != "0" || r[8] != "0s" {
			t.Errorf("request row %q", r)
		}
		if _, err := time.Parse(time.RFC3339Nano, r[5]); err != nil {
			t.Errorf("arrival %q: %v", r[5], err)
		}
	}
	if want := map[string]int{"0/0": 1, "0/1": 1, "0/-1": 3}; !maps.Equal(places, want) {
		t.Errorf("requests by queue/place %v, want %v", places, want)
	}
	for _, r := range rowsOf(dump(t, c, "dump_requests?includeRequestDetails=1", requestDetailHeader...), "small") {
		if got, want := r[10:], []string{"batch", "get", "", "default", "", "", "pods", ""}; !slices.Equal(got, want) {
			t.Errorf("details %q, want %q", got, want)
		}
	}

	c.Apply(small, true)
	if got := rowsOf(dump(t, c, "dump_priority_levels", levelHeader...), "small"); len(got) != 1 || got[0][3] != "true" {
		t.Errorf("small deleted while busy: %q, want it quiescing", got)
	}
	b.releaseAll()
	for range 5 {
		<-codes
	}
	waitFor(t, "the quiescing level gone", func() bool {
		return len(rowsOf(dump(t, c, "dump_priority_levels", levelHeader...), "small")) == 0
	})
}

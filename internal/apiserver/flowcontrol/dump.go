package flowcontrol

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DebugPathPrefix is where the filter's state is served, as by upstream's
// kube-apiserver: one row per priority level, per queue, or per request.
const DebugPathPrefix = "/debug/api_priority_and_fairness/"

// The columns of each dump, named as upstream's kube-apiserver names them (its
// "FlowDistingsher" included), so that scripts reading its dumps read these.
var (
	levelColumns = []string{"PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
		"ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests"}
	queueColumns = []string{"PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse",
		"NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"}
	requestColumns = []string{"PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue",
		"FlowDistingsher", "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"}
	requestDetailColumns = []string{"UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource"}
)

// ServeDebug answers the dumps under DebugPathPrefix; false if the path is none of
// them (the caller answers 404). Authorization by path happened before.
func (c *Controller) ServeDebug(w http.ResponseWriter, r *http.Request) bool {
	var body []byte
	switch strings.TrimPrefix(r.URL.Path, DebugPathPrefix) {
	case "dump_priority_levels":
		body = c.dumpLevels()
	case "dump_queues":
		body = c.dumpQueues()
	case "dump_requests":
		body = c.dumpRequests(r.URL.Query().Get("includeRequestDetails") != "")
	default:
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
	return true
}

// table writes rows of comma-separated cells aligned into columns, as upstream's
// dumps are (a tab writer of minimum width 8 and padding 1 over ",\t"-joined cells).
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 8, 0, 1, ' ', 0)
	return t
}

// row writes one line of cells; a second group of cells continues the line.
func (t *table) row(cells []string, more ...[]string) {
	line := strings.Join(cells, ",\t")
	for _, m := range more {
		line += ",\t" + strings.Join(m, ",\t")
	}
	_, _ = t.tw.Write([]byte(line + "\n"))
}

func (t *table) bytes() []byte {
	_ = t.tw.Flush()
	return t.buf.Bytes()
}

// levelsByName are the levels, quiescing ones included, in name order.
func (c *Controller) levelsByName() []*level {
	c.mu.Lock()
	defer c.mu.Unlock()
	levels := make([]*level, 0, len(c.states))
	for _, l := range c.states {
		levels = append(levels, l)
	}
	slices.SortFunc(levels, func(a, b *level) int { return strings.Compare(a.name, b.name) })
	return levels
}

// dumpLevels is a row per priority level: its requests now and its totals.
func (c *Controller) dumpLevels() []byte {
	t := newTable()
	t.row(levelColumns)
	for _, l := range c.levelsByName() {
		l.mu.Lock()
		active := 0
		for _, q := range l.queues {
			if len(q.waiting) > 0 {
				active++
			}
		}
		t.row([]string{l.name, strconv.Itoa(active), strconv.FormatBool(l.idleLocked()), strconv.FormatBool(l.quiescing),
			strconv.Itoa(l.waiting), strconv.Itoa(l.executing), strconv.Itoa(l.dispatched), strconv.Itoa(l.rejected),
			strconv.Itoa(l.timedout), strconv.Itoa(l.cancelled)})
		l.mu.Unlock()
	}
	return t.bytes()
}

// dumpQueues is a row per queue of every level: its requests waiting and executing,
// the seats these hold (and those held after a request's handler returned), the
// virtual time its next request starts at, and the sums of its waiting requests'
// initial seats, seats and work.
func (c *Controller) dumpQueues() []byte {
	t := newTable()
	t.row(queueColumns)
	for _, l := range c.levelsByName() {
		l.mu.Lock()
		for i, q := range l.queues {
			t.row([]string{l.name, strconv.Itoa(i), strconv.Itoa(len(q.waiting)), strconv.Itoa(q.executing.count),
				strconv.Itoa(q.seatsInUse), q.nextDispatchR.String(), strconv.Itoa(q.waitingInitial),
				strconv.Itoa(q.waitingSeats), q.waitingWork.String()})
		}
		l.mu.Unlock()
	}
	return t.bytes()
}

// dumpRequests is a row per request a level holds: those waiting, by queue and place,
// then those executing (place -1; queue -1 on a level without queues). With details,
// each row also says who sent the request and what it names.
func (c *Controller) dumpRequests(details bool) []byte {
	t := newTable()
	if details {
		t.row(requestColumns, requestDetailColumns)
	} else {
		t.row(requestColumns)
	}
	for _, l := range c.levelsByName() {
		l.mu.Lock()
		write := func(queue, place int, r *request) {
			cells := []string{l.name, r.schema, strconv.Itoa(queue), strconv.Itoa(place), r.distinguisher,
				r.arrive.UTC().Format(time.RFC3339Nano), strconv.Itoa(r.initialSeats), strconv.Itoa(r.finalSeats), r.additionalLatency.String(),
				r.start.UTC().Format(time.RFC3339Nano)}
			if !details {
				t.row(cells)
				return
			}
			in := &r.info
			gv := schema.GroupVersion{Group: in.APIGroup, Version: in.APIVersion}
			t.row(cells, []string{in.User.Name, in.Verb, in.Path, in.Namespace, in.Name, gv.String(), in.Resource, in.Subresource})
		}
		for i, q := range l.queues {
			for j, r := range q.waiting {
				write(i, j, r)
			}
			q.executing.each(func(r *request) { write(i, -1, r) })
		}
		l.queueless.each(func(r *request) { write(-1, -1, r) })
		l.mu.Unlock()
	}
	return t.bytes()
}

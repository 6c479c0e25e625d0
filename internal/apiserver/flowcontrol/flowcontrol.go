// Package flowcontrol is the apiserver's API Priority and Fairness filter, as
// upstream's kube-apiserver runs it. The FlowSchemas (lowest matchingPrecedence
// first, then by name) sort each request into a priority level and a flow (the
// schema and the user's name or the namespace). A limited level runs at most its
// current limit of seats at once: its share of the server's seats
// (nominalConcurrencyShares of --max-requests-inflight plus
// --max-mutating-requests-inflight, rounded up), less what it lends to busier levels
// or plus what it borrows from idler ones, recomputed every 10 s from each level's
// demand (borrowing.go). It queues the rest fairly among its flows (each flow's hash
// deals it a hand of queues and it joins the one with the least work waiting; the
// queues are served by virtual finish time, so that each busy queue gets an equal
// share of seat-seconds: fairqueue.go), and rejects with 429 what finds its queue
// full, or the level not queueing, or waits longer than its wait limit.
// Every response carries upstream's X-Kubernetes-PF-FlowSchema-UID and
// X-Kubernetes-PF-PriorityLevel-UID headers, and each FlowSchema's Dangling condition
// says whether its priority level exists. Upstream's /debug/api_priority_and_fairness/
// dumps show what each level, queue and request holds (dump.go).
//
// A list or a watch takes the seats upstream's work estimate gives it (listwork.go);
// a mutation takes one, and keeps final seats for a while after its handler returns,
// for the watch events it sends, by the number of watches open on what it changes
// (mutatingwork.go, watchcount.go); other requests take one. A watch holds its seats
// only while it sends its initial events (watchinit.go); the other long-running
// requests (exec, attach, port-forward, logs, proxies) are neither classified nor
// limited, as upstream's. The exempt level's requests are estimated alike: they never
// wait, but the seats they hold show in its metrics and its demand.
package flowcontrol

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	registryflowcontrol "mizzen/internal/registry/flowcontrol"
)

// Upstream's response headers naming, by UID, the schema and level a request got.
const (
	HeaderFlowSchemaUID    = "X-Kubernetes-PF-FlowSchema-UID"
	HeaderPriorityLevelUID = "X-Kubernetes-PF-PriorityLevel-UID"
)

// Defaults, as upstream's kube-apiserver flags have them.
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
	// DefaultWaitLimit is how long a request may wait for a seat: a quarter of
	// upstream's default request timeout (a minute).
	DefaultWaitLimit = 15 * time.Second
)

var (
	flowSchemas         = flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas").GroupResource()
	priorityLevels      = flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations").GroupResource()
	statusRetryInterval = time.Second
)

// Options configure a Controller.
type Options struct {
	// ServerSeats is the concurrency the limited levels share (upstream: the sum of
	// --max-requests-inflight and --max-mutating-requests-inflight).
	ServerSeats int
	// WaitLimit bounds a request's wait in its queue (DefaultWaitLimit if zero).
	WaitLimit time.Duration
	// BorrowingPeriod is how often RunBorrowing recomputes the levels' limits from
	// their demand (DefaultBorrowingPeriod if zero).
	BorrowingPeriod time.Duration
	// Clock is what the levels' demand and virtual time are timed by (time.Now if nil).
	Clock func() time.Time
	// AfterFunc calls f after d, as time.AfterFunc (the default) does: a mutation's
	// final seats are freed so.
	AfterFunc func(d time.Duration, f func())
	// WriteDangling writes a FlowSchema's Dangling condition unless it holds it already
	// (nil: conditions are not written).
	WriteDangling func(ctx context.Context, name string, cond flowcontrolv1.FlowSchemaCondition) error
	Logger        *slog.Logger
}

// Controller classifies and admits requests by the FlowSchemas and
// PriorityLevelConfigurations it is fed (it is an authz.Follower of the watch cache).
type Controller struct {
	opts    Options
	metrics *metrics

	mu      sync.Mutex
	schemas map[string]*flowcontrolv1.FlowSchema
	levels  map[string]*flowcontrolv1.PriorityLevelConfiguration
	// states are the levels' seats and queues by name, kept while the level exists.
	states map[string]*level
	synced map[schema.GroupResource]bool
	// danglingDirty wakes the status writer.
	danglingDirty chan struct{}
	// watches counts the watches open, for the mutations' estimate.
	watches watchCounts

	cfg atomic.Pointer[config]
}

// config is one configuration's classification: the schemas in matching order, those
// whose level exists, the mandatory ones supplied if missing.
type config struct {
	schemas  []*compiledSchema
	catchAll *compiledSchema
}

type compiledSchema struct {
	name    string
	method  flowcontrolv1.FlowDistinguisherMethodType
	rules   []flowcontrolv1.PolicyRulesWithSubjects
	level   *level
	metrics *schemaMetrics
	// uidHeader and levelUIDHeader are the response headers' values: the schema's and
	// its level's UIDs.
	uidHeader, levelUIDHeader []string
}

// New returns a controller that admits every request until it has been given both
// resources' objects.
func New(opts Options) *Controller {
	if opts.WaitLimit == 0 {
		opts.WaitLimit = DefaultWaitLimit
	}
	if opts.BorrowingPeriod == 0 {
		opts.BorrowingPeriod = DefaultBorrowingPeriod
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	if opts.ServerSeats <= 0 {
		opts.ServerSeats = DefaultMaxRequestsInflight + DefaultMaxMutatingRequestsInflight
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		opts:          opts,
		metrics:       newMetrics(opts.Clock),
		schemas:       map[string]*flowcontrolv1.FlowSchema{},
		levels:        map[string]*flowcontrolv1.PriorityLevelConfiguration{},
		states:        map[string]*level{},
		synced:        map[schema.GroupResource]bool{},
		danglingDirty: make(chan struct{}, 1),
	}
}

// Resources are those the controller follows.
func (c *Controller) Resources() []schema.GroupResource {
	return []schema.GroupResource{flowSchemas, priorityLevels}
}

// Replace sets every object of one resource.
func (c *Controller) Replace(gr schema.GroupResource, objs []runtime.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch gr {
	case flowSchemas:
		clear(c.schemas)
	case priorityLevels:
		clear(c.levels)
	default:
		return
	}
	for _, obj := range objs {
		c.putLocked(obj, false)
	}
	c.synced[gr] = true
	c.rebuildLocked()
}

// Apply records one object's change.
func (c *Controller) Apply(obj runtime.Object, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.putLocked(obj, deleted) {
		c.rebuildLocked()
	}
}

func (c *Controller) putLocked(obj runtime.Object, deleted bool) bool {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		if deleted {
			delete(c.schemas, o.Name)
		} else {
			c.schemas[o.Name] = o
		}
	case *flowcontrolv1.PriorityLevelConfiguration:
		if deleted {
			delete(c.levels, o.Name)
		} else {
			c.levels[o.Name] = o
		}
	default:
		return false
	}
	return true
}

// rebuildLocked makes the configuration from the objects: each level's seats, the
// schemas in matching order.
func (c *Controller) rebuildLocked() {
	if !c.synced[flowSchemas] || !c.synced[priorityLevels] {
		return
	}
	levels := maps.Clone(c.levels)
	for _, name := range []string{flowcontrolv1.PriorityLevelConfigurationNameExempt, flowcontrolv1.PriorityLevelConfigurationNameCatchAll} {
		if levels[name] == nil {
			// Upstream imagines a missing mandatory level until it is made again.
			levels[name] = registryflowcontrol.MandatoryPriorityLevel(name)
		}
	}
	// Levels deleted while holding requests keep their seats, quiescing, until they
	// are done; their shares count meanwhile, as upstream's.
	all := maps.Clone(levels)
	for name, st := range c.states {
		if levels[name] == nil && !st.drained() {
			all[name] = st.lastConfig()
		}
	}
	var shareSum float64
	for _, pl := range all {
		shareSum += float64(nominalShares(pl))
	}
	// What all the levels run and queue at the most (with their nominal seats), as
	// read_vs_write_current_requests shows the requests over.
	var serverSeats, serverQueued int
	for name, pl := range all {
		st := c.states[name]
		if st == nil {
			st = &level{name: name, now: c.opts.Clock, after: c.opts.AfterFunc,
				series: c.metrics.forLevel(name), concurrencyDenominator: 1, waitingDenominator: 1}
			c.states[name] = st
		}
		// A level of zero shares has no seats of its own: it runs what it borrows
		// (and, as upstream's, one request when it holds none).
		nominal := 0
		if shareSum > 0 {
			nominal = int(math.Ceil(float64(c.opts.ServerSeats) * float64(nominalShares(pl)) / shareSum))
		}
		lower, upper := levelBounds(pl, nominal, c.opts.ServerSeats)
		exempt := pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
		reject, queues, handSize, queueLength := true, 0, 1, 0
		if l := pl.Spec.Limited; l != nil && l.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue && l.LimitResponse.Queuing != nil {
			q := l.LimitResponse.Queuing
			reject, queues, handSize, queueLength = false, int(q.Queues), int(q.HandSize), int(q.QueueLengthLimit)
			serverQueued += queues * queueLength
		}
		serverSeats += nominal
		st.configure(pl, exempt, nominal, lower, upper, reject, queues, handSize, queueLength)
		st.setQuiescing(levels[name] == nil)
		c.metrics.setBounds(name, nominal, lower, upper)
	}
	c.metrics.setServerCapacity(serverSeats, serverQueued)
	// A level gone (deleted, and holding no request) leaves its series as they
	// were, as upstream's, which never deletes a level's series: its gauges keep
	// their last values, its counters their counts, and its timing histograms go on
	// counting time at their last ratio. A level made again under the name takes
	// them up.
	for name := range c.states {
		if all[name] == nil {
			delete(c.states, name)
		}
	}
	c.adjustLimitsLocked()

	schemas := maps.Clone(c.schemas)
	for _, name := range []string{flowcontrolv1.FlowSchemaNameExempt, flowcontrolv1.FlowSchemaNameCatchAll} {
		if schemas[name] == nil {
			schemas[name] = registryflowcontrol.MandatoryFlowSchema(name)
		}
	}
	cfg := &config{}
	for _, fs := range schemas {
		pl := levels[fs.Spec.PriorityLevelConfiguration.Name]
		if pl == nil {
			continue // dangling: matches nothing, as upstream
		}
		var method flowcontrolv1.FlowDistinguisherMethodType
		if fs.Spec.DistinguisherMethod != nil && queuesFlows(pl) {
			method = fs.Spec.DistinguisherMethod.Type
		}
		cfg.schemas = append(cfg.schemas, &compiledSchema{
			name: fs.Name, method: method, rules: fs.Spec.Rules, level: c.states[pl.Name],
			metrics:   c.metrics.forSchema(fs.Name, pl.Name, pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt, queuing(pl)),
			uidHeader: []string{string(fs.UID)}, levelUIDHeader: []string{string(pl.UID)},
		})
	}
	precedence := func(s *compiledSchema) int32 { return schemas[s.name].Spec.MatchingPrecedence }
	slices.SortFunc(cfg.schemas, func(a, b *compiledSchema) int {
		return cmp.Or(cmp.Compare(precedence(a), precedence(b)), cmp.Compare(a.name, b.name))
	})
	for _, s := range cfg.schemas {
		if s.name == flowcontrolv1.FlowSchemaNameCatchAll {
			cfg.catchAll = s
		}
	}
	c.cfg.Store(cfg)

	select {
	case c.danglingDirty <- struct{}{}:
	default:
	}
}

// reap drops the levels that were deleted while they held requests, now that one of
// them holds none.
func (c *Controller) reap() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rebuildLocked()
}

// nominalShares is a level's nominalConcurrencyShares (exempt levels' count too, as
// upstream's since 1.28).
func nominalShares(pl *flowcontrolv1.PriorityLevelConfiguration) int32 {
	switch {
	case pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil:
		return *pl.Spec.Limited.NominalConcurrencyShares
	case pl.Spec.Exempt != nil && pl.Spec.Exempt.NominalConcurrencyShares != nil:
		return *pl.Spec.Exempt.NominalConcurrencyShares
	}
	return 0
}

// queuing: the level queues the requests it has no seats for (it has queues).
func queuing(pl *flowcontrolv1.PriorityLevelConfiguration) bool {
	l := pl.Spec.Limited
	return l != nil && l.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue &&
		l.LimitResponse.Queuing != nil && l.LimitResponse.Queuing.Queues > 0
}

// queuesFlows: the level spreads flows over several queues, the only case where a
// schema's distinguisher method matters. Elsewhere upstream leaves the flow
// distinguisher empty, and its dumps show it so.
func queuesFlows(pl *flowcontrolv1.PriorityLevelConfiguration) bool {
	return queuing(pl) && pl.Spec.Limited.LimitResponse.Queuing.Queues > 1
}

// classify returns the schema a request matches (nil before the configuration is
// known) and its flow.
func (c *Controller) classify(r *Request) (*compiledSchema, uint64) {
	cfg := c.cfg.Load()
	if cfg == nil {
		return nil, 0
	}
	for _, s := range cfg.schemas {
		if schemaMatches(s.rules, r) {
			return s, flowHash(s.name, distinguisher(s.method, r))
		}
	}
	// The catch-all schema matches every authenticated or anonymous user; a request
	// whose user is in neither group (none is), or finds it dangling, lands there still.
	if s := cfg.catchAll; s != nil {
		return s, flowHash(s.name, distinguisher(s.method, r))
	}
	return nil, 0
}

// RunStatus keeps the FlowSchemas' Dangling conditions until ctx ends.
func (c *Controller) RunStatus(ctx context.Context) {
	if c.opts.WriteDangling == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.danglingDirty:
		}
		for !c.writeDangling(ctx) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(statusRetryInterval):
			}
		}
	}
}

// writeDangling writes each schema's condition where it differs; false if a write
// failed (the caller retries).
func (c *Controller) writeDangling(ctx context.Context) bool {
	type want struct {
		name string
		cond flowcontrolv1.FlowSchemaCondition
	}
	var writes []want
	c.mu.Lock()
	for name, fs := range c.schemas {
		cond := danglingCondition(fs, c.levels[fs.Spec.PriorityLevelConfiguration.Name] != nil)
		if cur := currentDangling(fs); cur == nil || !sameDangling(cur, &cond) {
			writes = append(writes, want{name, cond})
		}
	}
	c.mu.Unlock()
	ok := true
	for _, w := range writes {
		if err := c.opts.WriteDangling(ctx, w.name, w.cond); err != nil {
			c.opts.Logger.Warn("writing a FlowSchema's Dangling condition", "flowschema", w.name, "err", err)
			ok = false
		}
	}
	return ok
}

// danglingCondition is the Dangling condition a schema should have, in upstream's words.
func danglingCondition(fs *flowcontrolv1.FlowSchema, levelExists bool) flowcontrolv1.FlowSchemaCondition {
	name := fs.Spec.PriorityLevelConfiguration.Name
	cond := flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling,
		LastTransitionTime: metav1.Now()}
	if levelExists {
		cond.Status, cond.Reason = flowcontrolv1.ConditionFalse, "Found"
		cond.Message = "This FlowSchema references the PriorityLevelConfiguration object named \"" + name + "\" and it exists"
	} else {
		cond.Status, cond.Reason = flowcontrolv1.ConditionTrue, "NotFound"
		cond.Message = "This FlowSchema references the PriorityLevelConfiguration object named \"" + name + "\" but there is no such object"
	}
	return cond
}

// sameDangling: the two conditions say the same, whenever they were set.
func sameDangling(a, b *flowcontrolv1.FlowSchemaCondition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func currentDangling(fs *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchemaCondition {
	for i := range fs.Status.Conditions {
		if fs.Status.Conditions[i].Type == flowcontrolv1.FlowSchemaConditionDangling {
			return &fs.Status.Conditions[i]
		}
	}
	return nil
}

// SetDangling puts cond into the schema's conditions, replacing its Dangling one;
// it reports false when the schema holds that condition already (nothing to write).
func SetDangling(fs *flowcontrolv1.FlowSchema, cond flowcontrolv1.FlowSchemaCondition) bool {
	if cur := currentDangling(fs); cur != nil {
		if sameDangling(cur, &cond) {
			return false
		}
		if cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = cond
		return true
	}
	fs.Status.Conditions = append(fs.Status.Conditions, cond)
	return true
}

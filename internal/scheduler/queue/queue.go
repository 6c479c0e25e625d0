// Package queue is the scheduling queue: an active heap ordered by priority then age, a
// back-off heap with exponential per-pod back-off, and a pool of unschedulable pods that
// leave only when a cluster event that could help them happens (or after a timeout). It
// also tracks pods nominated to nodes by preemption.
package queue

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"mizzen/internal/scheduler/framework"
)

// Upstream defaults.
const (
	DefaultInitialBackoff         = 1 * time.Second
	DefaultMaxBackoff             = 10 * time.Second
	DefaultMaxInUnschedulablePods = 5 * time.Minute
	backoffFlushInterval          = 1 * time.Second
	unschedulableFlushInterval    = 30 * time.Second
)

// Queue names used by Pending and the scheduler_pending_pods metric.
const (
	Active        = "active"
	Backoff       = "backoff"
	Unschedulable = "unschedulable"
	Gated         = "gated"
)

// NoNodesAvailable is the pseudo-plugin recorded for pods that failed because the cluster
// had no nodes; any node addition retries them.
const NoNodesAvailable = "NoNodesAvailable"

// ErrClosed is returned by Pop after Close.
var ErrClosed = errors.New("scheduling queue is closed")

// Options tune the queue.
type Options struct {
	Clock                  clock.WithTicker
	InitialBackoff         time.Duration
	MaxBackoff             time.Duration
	MaxInUnschedulablePods time.Duration
	// PluginEvents maps a plugin name to the events that can undo its rejections.
	PluginEvents map[string][]framework.ClusterEventWithHint
}

// Queue is the scheduling queue. It is safe for concurrent use.
type Queue struct {
	clock                  clock.WithTicker
	initialBackoff         time.Duration
	maxBackoff             time.Duration
	maxInUnschedulablePods time.Duration
	pluginEvents           map[string][]framework.ClusterEventWithHint

	mu            sync.Mutex
	cond          *sync.Cond
	activeQ       *podHeap
	backoffQ      *backoff
	unschedulable map[string]*framework.QueuedPodInfo
	inFlight      map[string]*v1.Pod
	// schedulingCycle counts Pops; moveRequestCycle is the cycle of the last move event,
	// so a pod that fails while an event happened is retried instead of parked.
	schedulingCycle  int64
	moveRequestCycle int64
	closed           bool

	nominator *nominator
}

// New returns a queue; call Run to start its flush loops.
func New(opts Options) *Queue {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.InitialBackoff == 0 {
		opts.InitialBackoff = DefaultInitialBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxInUnschedulablePods == 0 {
		opts.MaxInUnschedulablePods = DefaultMaxInUnschedulablePods
	}
	q := &Queue{
		clock:                  opts.Clock,
		initialBackoff:         opts.InitialBackoff,
		maxBackoff:             opts.MaxBackoff,
		maxInUnschedulablePods: opts.MaxInUnschedulablePods,
		pluginEvents:           map[string][]framework.ClusterEventWithHint{},
		unschedulable:          map[string]*framework.QueuedPodInfo{},
		inFlight:               map[string]*v1.Pod{},
		moveRequestCycle:       -1,
		nominator:              newNominator(),
	}
	for name, evs := range opts.PluginEvents {
		q.pluginEvents[name] = evs
	}
	q.pluginEvents[NoNodesAvailable] = []framework.ClusterEventWithHint{{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}}}
	q.cond = sync.NewCond(&q.mu)
	q.activeQ = newPodHeap(func(a, b *framework.QueuedPodInfo) bool {
		return a.Priority > b.Priority || (a.Priority == b.Priority && a.Timestamp.Before(b.Timestamp))
	})
	q.backoffQ = newBackoff(q.backoffExpiry)
	return q
}

// Run flushes the back-off heap every second and the unschedulable pool every 30s until
// ctx ends, then closes the queue.
func (q *Queue) Run(ctx context.Context) {
	backoff := q.clock.NewTicker(backoffFlushInterval)
	leftover := q.clock.NewTicker(unschedulableFlushInterval)
	defer backoff.Stop()
	defer leftover.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-backoff.C():
			q.FlushBackoffCompleted()
		case <-leftover.C():
			q.FlushUnschedulableLeftover()
		}
	}
}

// Close wakes Pop callers with ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

func (q *Queue) newQueuedPodInfo(pod *v1.Pod) *framework.QueuedPodInfo {
	return &framework.QueuedPodInfo{
		PodInfo:   framework.NewPodInfo(pod),
		Timestamp: q.clock.Now(),
		Gated:     len(pod.Spec.SchedulingGates) > 0,
	}
}

// Add enqueues a new pending pod.
func (q *Queue) Add(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := framework.PodKey(pod)
	if _, ok := q.inFlight[key]; ok {
		q.inFlight[key] = pod
		return
	}
	if _, ok := q.activeQ.Get(key); ok {
		return
	}
	q.backoffQ.Delete(key)
	delete(q.unschedulable, key)
	q.addActiveOrGated(q.newQueuedPodInfo(pod))
	q.nominator.addFromPod(pod)
}

// addActiveOrGated puts gated pods in the unschedulable pool (they wait for their gates to
// be removed) and others in the active heap.
func (q *Queue) addActiveOrGated(p *framework.QueuedPodInfo) {
	p.Gated = len(p.Pod.Spec.SchedulingGates) > 0
	if p.Gated {
		q.unschedulable[p.Key()] = p
		return
	}
	q.activeQ.AddOrUpdate(p)
	q.cond.Broadcast()
}

// Update replaces a pending pod. A pod parked as unschedulable is retried if its spec
// changed in a way that might help, as upstream does for any pod update.
func (q *Queue) Update(oldPod, newPod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := framework.PodKey(newPod)
	q.nominator.update(oldPod, newPod)
	if _, ok := q.inFlight[key]; ok {
		q.inFlight[key] = newPod
		return
	}
	if p, ok := q.activeQ.Get(key); ok {
		p.PodInfo.Update(newPod)
		q.activeQ.AddOrUpdate(p)
		return
	}
	if p, ok := q.backoffQ.Get(key); ok {
		p.PodInfo.Update(newPod)
		q.backoffQ.AddOrUpdate(p)
		return
	}
	if p, ok := q.unschedulable[key]; ok {
		p.PodInfo.Update(newPod)
		if oldPod != nil && !specChanged(oldPod, newPod) {
			return
		}
		delete(q.unschedulable, key)
		if p.Gated || q.isBackingOff(p) {
			if len(newPod.Spec.SchedulingGates) > 0 {
				q.unschedulable[key] = p
				return
			}
			if p.Gated {
				q.addActiveOrGated(p)
				return
			}
			q.addBackoff(p)
			return
		}
		q.addActiveOrGated(p)
		return
	}
	q.addActiveOrGated(q.newQueuedPodInfo(newPod))
}

// specChanged ignores status-only and resourceVersion changes, which cannot help a pod fit.
func specChanged(oldPod, newPod *v1.Pod) bool {
	if !equality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec) {
		return true
	}
	return !equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels)
}

// Delete drops a pod from every queue.
func (q *Queue) Delete(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := framework.PodKey(pod)
	q.activeQ.Delete(key)
	q.backoffQ.Delete(key)
	delete(q.unschedulable, key)
	q.nominator.delete(pod)
}

// Pop blocks until a pod is active, then returns it, counting a scheduling attempt.
func (q *Queue) Pop(ctx context.Context) (*framework.QueuedPodInfo, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.cond.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.poppableLocked() {
		if q.closed {
			return nil, ErrClosed
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		q.cond.Wait()
	}
	p := q.activeQ.PopHead()
	if p == nil {
		// Nothing active: rather than idle, retry the rejected pod whose back-off
		// ends first, as upstream's SchedulerPopFromBackoffQ does.
		p = q.backoffQ.popEarly()
	}
	p.Attempts++
	q.schedulingCycle++
	if p.InitialAttemptTimestamp == nil {
		now := q.clock.Now()
		p.InitialAttemptTimestamp = &now
	}
	q.inFlight[p.Key()] = p.Pod
	return p, nil
}

// poppableLocked says whether Pop has a pod to return: an active one, or a rejected
// one in back-off.
func (q *Queue) poppableLocked() bool {
	return q.activeQ.Len() > 0 || q.backoffQ.canPopEarly()
}

// SchedulingCycle returns the number of pods popped so far.
func (q *Queue) SchedulingCycle() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.schedulingCycle
}

// Done ends a pod's scheduling attempt (after it was bound, requeued or deleted).
func (q *Queue) Done(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, framework.PodKey(pod))
}

// AddUnschedulableIfNotPresent requeues a pod whose attempt (popped at podCycle) failed:
// to back-off when it failed with an error or a move event arrived meanwhile, otherwise
// to the unschedulable pool. The latest version of the pod seen while in flight wins.
func (q *Queue) AddUnschedulableIfNotPresent(p *framework.QueuedPodInfo, podCycle int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := p.Key()
	if latest, ok := q.inFlight[key]; ok && latest != p.Pod {
		p.PodInfo.Update(latest)
	}
	delete(q.inFlight, key)
	if _, ok := q.activeQ.Get(key); ok {
		return
	}
	if _, ok := q.backoffQ.Get(key); ok {
		return
	}
	if _, ok := q.unschedulable[key]; ok {
		return
	}
	p.Timestamp = q.clock.Now()
	if len(p.UnschedulablePlugins) == 0 || q.moveRequestCycle >= podCycle {
		q.addBackoff(p)
		return
	}
	q.unschedulable[key] = p
}

// Requeue puts a pod back into the active heap immediately (e.g. after a bind error in
// another goroutine, once back-off already applies through Attempts).
func (q *Queue) Requeue(p *framework.QueuedPodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, p.Key())
	p.Timestamp = q.clock.Now()
	q.addBackoff(p)
}

// addBackoff puts p in back-off and wakes Pop, which may take it early.
func (q *Queue) addBackoff(p *framework.QueuedPodInfo) {
	q.backoffQ.AddOrUpdate(p)
	if q.backoffQ.canPopEarly() {
		q.cond.Broadcast()
	}
}

func (q *Queue) backoffDuration(p *framework.QueuedPodInfo) time.Duration {
	d := q.initialBackoff
	for i := 1; i < p.Attempts; i++ {
		if d > q.maxBackoff/2 {
			return q.maxBackoff
		}
		d *= 2
	}
	if d > q.maxBackoff {
		return q.maxBackoff
	}
	return d
}

func (q *Queue) backoffExpiry(p *framework.QueuedPodInfo) time.Time {
	return p.Timestamp.Add(q.backoffDuration(p))
}

func (q *Queue) isBackingOff(p *framework.QueuedPodInfo) bool {
	return q.backoffExpiry(p).After(q.clock.Now())
}

// FlushBackoffCompleted moves pods whose back-off expired to the active heap.
func (q *Queue) FlushBackoffCompleted() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.backoffQ.popCompleted(q.isBackingOff) {
		q.addActiveOrGated(p)
	}
}

// FlushUnschedulableLeftover retries pods parked longer than the maximum (5 minutes).
func (q *Queue) FlushUnschedulableLeftover() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var stale []*framework.QueuedPodInfo
	for _, p := range q.unschedulable {
		if !p.Gated && now.Sub(p.Timestamp) > q.maxInUnschedulablePods {
			stale = append(stale, p)
		}
	}
	q.moveLocked(stale, framework.EventUnschedulableTimeout, nil, nil)
}

// MoveAllToActiveOrBackoffQueue retries every unschedulable pod that a plugin rejected
// and that registered event as able to help. preCheck, if set, filters pods further.
func (q *Queue) MoveAllToActiveOrBackoffQueue(event framework.ClusterEvent, oldObj, newObj interface{}, preCheck func(*v1.Pod) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var pods []*framework.QueuedPodInfo
	for _, p := range q.unschedulable {
		if p.Gated {
			continue
		}
		if preCheck == nil || preCheck(p.Pod) {
			pods = append(pods, p)
		}
	}
	q.moveLocked(pods, event, oldObj, newObj)
	q.moveRequestCycle = q.schedulingCycle
}

func (q *Queue) moveLocked(pods []*framework.QueuedPodInfo, event framework.ClusterEvent, oldObj, newObj interface{}) {
	moved := false
	for _, p := range pods {
		if !q.eventCanHelp(p, event, oldObj, newObj) {
			continue
		}
		delete(q.unschedulable, p.Key())
		if q.isBackingOff(p) {
			q.addBackoff(p)
		} else {
			q.activeQ.AddOrUpdate(p)
			moved = true
		}
	}
	if moved {
		q.cond.Broadcast()
	}
}

// eventCanHelp reports whether any plugin that rejected p registered event (with a hint
// that agrees). A pod rejected by no known plugin moves on any event.
func (q *Queue) eventCanHelp(p *framework.QueuedPodInfo, event framework.ClusterEvent, oldObj, newObj interface{}) bool {
	if event.Resource == framework.WildCard && event.ActionType == framework.All {
		return true
	}
	if len(p.UnschedulablePlugins) == 0 {
		return true
	}
	for name := range p.UnschedulablePlugins {
		for _, reg := range q.pluginEvents[name] {
			if !reg.Event.Match(event) {
				continue
			}
			if reg.QueueingHintFn == nil || reg.QueueingHintFn(p.Pod, oldObj, newObj) {
				return true
			}
		}
	}
	return false
}

// Activate moves the pod to the active heap if it waits in the unschedulable pool or
// in back-off, as upstream's Activate; a pod in flight has its next failure sent to
// back-off instead of the pool, so the activation is not lost. The async preemption
// calls it when its API calls end, since the preemptor's retry must not wait for a
// cluster event that may already have passed.
func (q *Queue) Activate(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := framework.PodKey(pod)
	if _, ok := q.inFlight[key]; ok {
		q.moveRequestCycle = q.schedulingCycle
		return
	}
	p, ok := q.unschedulable[key]
	if ok {
		if p.Gated {
			return
		}
		delete(q.unschedulable, key)
	} else if p, ok = q.backoffQ.Get(key); ok {
		q.backoffQ.Delete(key)
	} else {
		return
	}
	q.activeQ.AddOrUpdate(p)
	q.cond.Broadcast()
}

// Pending returns the number of pods in each queue, keyed by Active, Backoff,
// Unschedulable and Gated.
func (q *Queue) Pending() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	gated := 0
	for _, p := range q.unschedulable {
		if p.Gated {
			gated++
		}
	}
	return map[string]int{
		Active:        q.activeQ.Len(),
		Backoff:       q.backoffQ.Len(),
		Unschedulable: len(q.unschedulable) - gated,
		Gated:         gated,
	}
}

// Where reports which queue holds the pod with key ("" if none), for tests and debugging.
func (q *Queue) Where(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.activeQ.Get(key); ok {
		return Active
	}
	if _, ok := q.backoffQ.Get(key); ok {
		return Backoff
	}
	if p, ok := q.unschedulable[key]; ok {
		if p.Gated {
			return Gated
		}
		return Unschedulable
	}
	if _, ok := q.inFlight[key]; ok {
		return "inflight"
	}
	return ""
}

// AddNominatedPod records that preemption nominated pod to nodeName.
func (q *Queue) AddNominatedPod(pi *framework.PodInfo, nodeName string) {
	q.nominator.add(pi, nodeName)
}

// DeleteNominatedPodIfExists forgets a nomination.
func (q *Queue) DeleteNominatedPodIfExists(pod *v1.Pod) { q.nominator.delete(pod) }

// HasNominatedPods reports whether any pod is nominated to any node.
func (q *Queue) HasNominatedPods() bool { return q.nominator.count.Load() > 0 }

// NominatedPodsForNode returns pods nominated to nodeName.
func (q *Queue) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	return q.nominator.forNode(nodeName)
}

type nominator struct {
	// count mirrors len(podToNode), so the filter's per-node lookup skips the lock
	// when nothing is nominated (the common case, asked for every node of every pod).
	count     atomic.Int64
	mu        sync.RWMutex
	byNode    map[string][]*framework.PodInfo
	podToNode map[types.UID]string
}

func newNominator() *nominator {
	return &nominator{byNode: map[string][]*framework.PodInfo{}, podToNode: map[types.UID]string{}}
}

func (n *nominator) addFromPod(pod *v1.Pod) {
	if pod.Status.NominatedNodeName != "" {
		n.add(framework.NewPodInfo(pod), pod.Status.NominatedNodeName)
	}
}

func (n *nominator) add(pi *framework.PodInfo, nodeName string) {
	n.delete(pi.Pod)
	if nodeName == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	uid := pi.UID
	n.podToNode[uid] = nodeName
	n.byNode[nodeName] = append(n.byNode[nodeName], pi)
	n.count.Store(int64(len(n.podToNode)))
}

func (n *nominator) delete(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	uid := framework.PodUID(pod)
	node, ok := n.podToNode[uid]
	if !ok {
		return
	}
	delete(n.podToNode, uid)
	n.count.Store(int64(len(n.podToNode)))
	list := n.byNode[node]
	for i, pi := range list {
		if pi.UID == uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = list
	}
}

func (n *nominator) update(oldPod, newPod *v1.Pod) {
	if newPod.Status.NominatedNodeName == "" && n.count.Load() == 0 {
		return
	}
	n.mu.RLock()
	node, had := n.podToNode[framework.PodUID(newPod)]
	n.mu.RUnlock()
	// A nomination made by this scheduler may not be visible in the status yet; keep it
	// unless the status names a different node.
	if newPod.Status.NominatedNodeName == "" && had && (oldPod == nil || oldPod.Status.NominatedNodeName == "") {
		n.add(framework.NewPodInfo(newPod), node)
		return
	}
	n.add(framework.NewPodInfo(newPod), newPod.Status.NominatedNodeName)
}

func (n *nominator) forNode(nodeName string) []*framework.PodInfo {
	if n.count.Load() == 0 {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	list := n.byNode[nodeName]
	if len(list) == 0 {
		return nil
	}
	return append([]*framework.PodInfo(nil), list...)
}

// Dump lists pod keys per queue: active in pop order, backoff in expiry order, and the
// unschedulable pool (gated pods included) by key. For tests and debugging.
func (q *Queue) Dump() map[string][]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string][]string{}
	drain := func(h *podHeap) []string {
		c := newPodHeap(h.less)
		for _, p := range h.items {
			c.AddOrUpdate(p)
		}
		var keys []string
		for c.Len() > 0 {
			keys = append(keys, c.PopHead().Key())
		}
		return keys
	}
	out[Active] = drain(q.activeQ)
	out[Backoff] = append(drain(q.backoffQ.rejected), drain(q.backoffQ.errored)...)
	for key, p := range q.unschedulable {
		if p.Gated {
			out[Gated] = append(out[Gated], key)
		} else {
			out[Unschedulable] = append(out[Unschedulable], key)
		}
	}
	sort.Strings(out[Unschedulable])
	sort.Strings(out[Gated])
	return out
}

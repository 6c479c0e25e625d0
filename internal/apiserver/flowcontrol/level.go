package flowcontrol

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// level is one priority level's seats and queues. It outlives configuration changes
// (its limits are updated in place), so that requests in flight and waiting keep
// their places; a level deleted while it still holds requests stays, quiescing, until
// they are done.
type level struct {
	name string

	mu sync.Mutex
	// pl is the configuration the level was last given (a quiescing level keeps it).
	pl *flowcontrolv1.PriorityLevelConfiguration
	// quiescing: the level's object is gone; it only finishes the requests it holds.
	quiescing bool
	// exempt levels run everything at once.
	exempt bool
	// limit is the seats the level's requests may hold at once now (upstream's
	// currentCL): its nominal seats, less what it lends, plus what it borrows.
	limit int
	// nominal is its share of the server's seats; lower is what it never lends
	// (nominal less lendablePercent of it), upper the most it may hold by borrowing
	// (nominal plus borrowingLimitPercent of it).
	nominal, lower, upper int
	// demand integrates the seats the level could use (executing and waiting) over
	// the period between adjustments; stats is what the last adjustment took of it.
	demand demandIntegrator
	stats  demandStats
	// now is the clock the demand is integrated by.
	now func() time.Time
	// maxSeats is the most seats one request takes here (levelMaxSeats), read
	// without the lock by each request.
	maxSeats atomic.Int32
	// reject: the level does not queue; a request without a free seat is rejected.
	reject bool
	// queues are the level's queues: none when it rejects (but one to drain what
	// waited when it stopped queueing).
	queues           []*queue
	handSize         int
	queueLengthLimit int
	// queueless holds the requests executing on a level without queues.
	queueless execList
	executing int
	waiting   int
	// seatsInUse and seatsWaiting are the seats of the requests executing and waiting.
	seatsInUse, seatsWaiting int
	// next is where the round robin over the queues resumes.
	next int
	// retry is the Retry-After of the level's refusals.
	retry retryAfter
	// The totals the dumps report, since the level was made.
	dispatched, rejected, timedout, cancelled int
}

type queue struct {
	waiting   []*request
	executing execList
}

// request is one request a level admits, from its arrival until it is done or turned
// away: what the dumps show of it, and its place in its queue.
type request struct {
	info          Request
	schema        string
	distinguisher string
	flow          uint64
	seats         int
	arrive, start time.Time

	// ready is closed, under the level's lock, once the request waiting holds its seats.
	ready      chan struct{}
	dispatched bool
	q          *queue
	// list is the executing list it is in; prev and next link it there.
	list       *execList
	prev, next *request
}

// execList is the requests executing from one queue (or from a level without
// queues), linked through the requests themselves so that starting and finishing a
// request allocates nothing.
type execList struct {
	head  *request
	count int
	seats int
}

func (e *execList) add(r *request) {
	r.list, r.prev, r.next = e, nil, e.head
	if e.head != nil {
		e.head.prev = r
	}
	e.head = r
	e.count++
	e.seats += r.seats
}

func (e *execList) remove(r *request) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		e.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.list, r.prev, r.next = nil, nil, nil
	e.count--
	e.seats -= r.seats
}

// each calls f for every request of the list.
func (e *execList) each(f func(*request)) {
	for r := e.head; r != nil; r = r.next {
		f(r)
	}
}

// Why a request was rejected, as upstream's apiserver_flowcontrol_rejected_requests_total
// labels it.
const (
	rejectQueueFull  = "queue-full"
	rejectConcurrent = "concurrency-limit"
	rejectTimeout    = "time-out"
	rejectCancelled  = "cancelled"
)

// configure sets the level's limits; queued and executing requests are dealt to the
// new queues if their number changed, and as many start as the new limit allows.
// A new level starts with its nominal seats less half what it may lend, as
// upstream's, until the adjustment that follows every configuration.
func (l *level) configure(pl *flowcontrolv1.PriorityLevelConfiguration, exempt bool, nominal, lower, upper int, reject bool, queues, handSize, queueLengthLimit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if reject || exempt {
		queues = 0
	}
	if l.pl == nil {
		l.limit = nominal - (nominal-lower)/2
		l.demand.reset(l.now())
	}
	l.pl = pl
	l.exempt, l.reject = exempt, reject
	l.nominal, l.lower, l.upper = nominal, lower, upper
	l.maxSeats.Store(int32(levelMaxSeats(nominal, handSize, !reject && !exempt && queues > 0)))
	l.handSize, l.queueLengthLimit = max(handSize, 1), queueLengthLimit
	if len(l.queues) != queues {
		l.redealLocked(queues)
	}
	l.dispatchLocked()
}

// redealLocked replaces the queues by n new ones and deals every request, waiting or
// executing, to the queue its flow gets among them (executing ones to the level's
// queueless list when there are no queues).
func (l *level) redealLocked(n int) {
	var waiting, executing []*request
	for _, q := range l.queues {
		waiting = append(waiting, q.waiting...)
		q.executing.each(func(r *request) { executing = append(executing, r) })
	}
	l.queueless.each(func(r *request) { executing = append(executing, r) })
	l.queues = make([]*queue, n)
	for i := range l.queues {
		l.queues[i] = &queue{}
	}
	l.queueless = execList{}
	l.next = 0
	for _, r := range executing {
		r.list = nil
		l.homeLocked(r.flow).add(r)
	}
	if n == 0 && len(waiting) > 0 {
		// The level no longer queues: those that waited are served as seats free
		// up, in arrival order, from one queue that takes no newcomers.
		l.queues = []*queue{{}}
	}
	for _, r := range waiting {
		q := l.shortestInHand(r.flow)
		r.q = q
		q.waiting = append(q.waiting, r)
	}
}

// homeLocked is the executing list a request of the flow joins on starting at once:
// the queue shuffle sharding gives it, as upstream's, or the level's own list.
func (l *level) homeLocked(flow uint64) *execList {
	if l.reject || l.exempt || len(l.queues) == 0 {
		return &l.queueless
	}
	return &l.shortestInHand(flow).executing
}

// seatsFor is what a request estimated at the given seats takes of the level: at
// least one, at most the level's maximum.
func (l *level) seatsFor(estimate int) int {
	return max(1, min(estimate, int(l.maxSeats.Load())))
}

// fitsLocked: a request of the given seats may start now. As upstream's, a request
// asking for more than the whole limit runs when nothing else does.
func (l *level) fitsLocked(seats int) bool {
	return l.exempt || l.seatsInUse == 0 || l.seatsInUse+seats <= l.limit
}

// startLocked makes the request hold its seats, executing from list.
func (l *level) startLocked(r *request, list *execList) {
	r.start = time.Now()
	list.add(r)
	l.executing++
	l.seatsInUse += r.seats
	l.dispatched++
	l.noteDemandLocked()
}

// noteDemandLocked feeds the integrator the level's seat demand after a change.
func (l *level) noteDemandLocked() {
	if x := float64(l.seatsInUse + l.seatsWaiting); x != l.demand.x {
		l.demand.set(l.now(), x)
	}
}

// setLimit gives the level its seats for the coming period; as many requests start
// as a raised limit lets.
func (l *level) setLimit(limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = limit
	l.dispatchLocked()
}

// acquire takes the request's seats, queueing it while they are not free, for at most
// waitLimit or until ctx ends (the client gone); queued is called when it joins a
// queue. It returns how long the request waited, and the reason when it was rejected
// (then no seat is held).
func (l *level) acquire(ctx context.Context, r *request, waitLimit time.Duration, queued func()) (time.Duration, string) {
	if r.seats < 1 {
		r.seats = 1
	}
	l.mu.Lock()
	r.arrive = time.Now()
	if l.waiting == 0 && l.fitsLocked(r.seats) {
		l.startLocked(r, l.homeLocked(r.flow))
		l.mu.Unlock()
		return 0, ""
	}
	if l.reject {
		l.rejected++
		l.mu.Unlock()
		return 0, rejectConcurrent
	}
	q := l.shortestInHand(r.flow)
	if len(q.waiting) >= l.queueLengthLimit {
		l.rejected++
		l.mu.Unlock()
		return 0, rejectQueueFull
	}
	r.ready, r.q = make(chan struct{}), q
	q.waiting = append(q.waiting, r)
	l.waiting++
	l.seatsWaiting += r.seats
	l.noteDemandLocked()
	l.mu.Unlock()
	queued()

	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	reason := rejectTimeout
	select {
	case <-r.ready:
		return r.start.Sub(r.arrive), ""
	case <-limit.C:
	case <-ctx.Done():
		reason = rejectCancelled
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.dispatched {
		return r.start.Sub(r.arrive), "" // the seat came as the wait ended: use it
	}
	r.q.remove(r)
	l.waiting--
	l.seatsWaiting -= r.seats
	l.noteDemandLocked()
	l.rejected++
	if reason == rejectTimeout {
		l.timedout++
	} else {
		l.cancelled++
	}
	return time.Since(r.arrive), reason
}

// release frees the request's seats and gives them to the requests waiting next. It
// reports whether the level is quiescing and now holds nothing (it can go).
func (l *level) release(r *request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.list.remove(r)
	l.executing--
	l.seatsInUse -= r.seats
	l.noteDemandLocked()
	l.dispatchLocked()
	if l.reject && l.waiting == 0 && len(l.queues) > 0 {
		l.redealLocked(0) // what waited when the level stopped queueing is done
	}
	return l.quiescing && l.idleLocked()
}

// dispatchLocked starts waiting requests while seats are free, taking the queues in
// turn so that each flow's queue gets its share whatever the others hold.
func (l *level) dispatchLocked() {
	for l.waiting > 0 {
		var q *queue
		for i := 0; i < len(l.queues); i++ {
			if c := l.queues[(l.next+i)%len(l.queues)]; len(c.waiting) > 0 {
				q = c
				l.next = (l.next + i + 1) % len(l.queues)
				break
			}
		}
		r := q.waiting[0]
		if !l.fitsLocked(r.seats) {
			l.next = (l.next + len(l.queues) - 1) % len(l.queues) // its turn again next time
			return
		}
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		l.waiting--
		l.seatsWaiting -= r.seats
		l.startLocked(r, &q.executing)
		r.dispatched = true
		close(r.ready)
	}
}

// idleLocked: nothing executes or waits.
func (l *level) idleLocked() bool { return l.executing == 0 && l.waiting == 0 }

// drained: the level holds no request.
func (l *level) drained() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idleLocked()
}

// reapable: the level is quiescing and holds no request any more, so it can go.
func (l *level) reapable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.quiescing && l.idleLocked()
}

// lastConfig is the configuration the level was last given.
func (l *level) lastConfig() *flowcontrolv1.PriorityLevelConfiguration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pl
}

func (l *level) setQuiescing(q bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.quiescing = q
}

// shortestInHand deals the flow its hand of queues (shuffle sharding: the flow's hash
// picks handSize distinct queues) and returns the one with the fewest waiting, so that
// a heavy flow fills only its own hand and other flows find a short queue in theirs.
func (l *level) shortestInHand(flow uint64) *queue {
	var best *queue
	dealHand(flow, len(l.queues), l.handSize, func(i int) {
		if q := l.queues[i]; best == nil || len(q.waiting) < len(best.waiting) {
			best = q
		}
	})
	return best
}

// dealHand calls card with hand distinct indices of a deck of deck cards, chosen by
// the hash: its digits in the mixed radix deck, deck-1, ... each pick one of the
// cards not dealt yet.
func dealHand(hash uint64, deck, hand int, card func(int)) {
	hand = min(hand, deck)
	var small [128]bool // no allocation for the usual decks
	dealt := small[:0]
	if deck <= len(small) {
		dealt = small[:deck]
	} else {
		dealt = make([]bool, deck)
	}
	for i := range hand {
		r := int(hash % uint64(deck-i))
		hash /= uint64(deck - i)
		idx := 0
		for ; dealt[idx] || r > 0; idx++ {
			if !dealt[idx] {
				r--
			}
		}
		dealt[idx] = true
		card(idx)
	}
}

func (q *queue) remove(r *request) {
	for i, x := range q.waiting {
		if x == r {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return
		}
	}
}

// flowHash is a flow's identity: the schema's name and the distinguisher.
// It is 64-bit FNV-1a, computed without allocating: every queued request takes one.
func flowHash(schema, distinguisher string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(schema); i++ {
		h = (h ^ uint64(schema[i])) * prime
	}
	h *= prime // a zero byte between the two
	for i := 0; i < len(distinguisher); i++ {
		h = (h ^ uint64(distinguisher[i])) * prime
	}
	return h
}

package flowcontrol

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// series show the level on /metrics (nil: not shown). Its timing histograms
	// show ratios, as upstream's: the demand, the seats in use and the requests
	// executing over concurrencyDenominator (the current limit, or a tenth of the
	// server's seats while that is zero; 1 until the first adjustment), the requests
	// waiting over waitingDenominator (what its queues hold at the most: queues times
	// queueLengthLimit; 1 without queues).
	series                                     *levelSeries
	concurrencyDenominator, waitingDenominator float64
	// now is the clock the demand and the virtual time go by; after calls a function
	// after a while (time.AfterFunc).
	now   func() time.Time
	after func(time.Duration, func())
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
	// seatsInUse and seatsWaiting are the seats of the requests executing (or holding
	// their final seats after their handler returned) and waiting.
	seatsInUse, seatsWaiting int
	// Fair queuing (fairqueue.go): the virtual time R and when it was last advanced;
	// the queues holding requests and the seats their requests hold or wait for,
	// which R advances by; where the round robin among equals resumes; and the
	// requests dealt a queue so far (it rotates the ties in a hand).
	currentR     seatSeconds
	lastSync     time.Time
	activeQueues int
	queuedSeats  int
	robin        int
	enqueues     int
	// retry is the Retry-After of the level's refusals.
	retry retryAfter
	// The totals the dumps report, since the level was made. As upstream's, a request
	// that gave up waiting (its wait limit passed or its client left) counts as
	// rejected and cancelled; timedout stays zero.
	dispatched, rejected, timedout, cancelled int
}

type queue struct {
	waiting   []*request
	executing execList
	// seatsInUse are the seats of its requests executing or holding their final seats.
	seatsInUse int
	// The sums over its waiting requests: initial seats, seats, and work.
	waitingInitial, waitingSeats int
	waitingWork                  seatSeconds
	// nextDispatchR is the virtual time its next request starts at.
	nextDispatchR seatSeconds
	// gone: the level replaced its queues; requests still holding seats of this one
	// give them back to the level only.
	gone bool
}

// levelSeries are a level's series, resolved when it is made.
type levelSeries struct {
	// demand is apiserver_flowcontrol_demand_seats, seats
	// priority_level_seat_utilization, executing and waiting
	// priority_level_request_utilization's two phases.
	demand, seats, executing, waiting *timedRatio
	// currentR is current_r, made with the level (as upstream's, whose queueset
	// shows R whenever it is locked, configured first).
	currentR prometheus.Gauge
	// dispatch are dispatch_r, latest_s and the bounds of S, made by the level's
	// first dispatch from a queue.
	dispatch onUse[*dispatchSeries]
	// epochAdvanced counts a shift of its virtual time back (epochAdvances).
	epochAdvanced func(success bool)
}

// request is one request a level admits, from its arrival until it is done or turned
// away: what the dumps show of it, and its place in its queue.
type request struct {
	info          Request
	schema        string
	distinguisher string
	flow          uint64
	// seats are what it holds from its start until its final seats are freed: the
	// larger of its initial seats (while its handler runs) and its final seats (which
	// it keeps additionalLatency longer, for a mutation's watch notifications).
	seats             int
	initialSeats      int
	finalSeats        int
	additionalLatency time.Duration
	// totalWork is what fair queuing charges it: initial seats times
	// estimatedServiceTime plus final seats times additionalLatency.
	totalWork     seatSeconds
	arrivalR      seatSeconds
	arrive, start time.Time
	// ran is how long it executed: set when it is released.
	ran time.Duration
	// metrics are its schema's series (nil: not shown): current_executing_seats
	// counts its seats from its start until they are freed.
	metrics *schemaMetrics

	// ready is closed, under the level's lock, once the request waiting holds its seats.
	ready      chan struct{}
	dispatched bool
	// q is the queue it waits or executes in (nil on a level without queues).
	q *queue
	// list is the executing list it is in; prev and next link it there.
	list       *execList
	prev, next *request
}

// setWork sets the request's seats and work from its estimate.
func (r *request) setWork(initial, final int, latency time.Duration) {
	r.initialSeats, r.finalSeats, r.additionalLatency = initial, final, latency
	r.seats = max(initial, final)
	r.totalWork = seatsTimes(float64(initial), estimatedServiceTime) + seatsTimes(float64(final), latency)
}

// execList is the requests executing from one queue (or from a level without
// queues), linked through the requests themselves so that starting and finishing a
// request allocates nothing.
type execList struct {
	head  *request
	count int
}

func (e *execList) add(r *request) {
	r.list, r.prev, r.next = e, nil, e.head
	if e.head != nil {
		e.head.prev = r
	}
	e.head = r
	e.count++
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
}

// each calls f for every request of the list.
func (e *execList) each(f func(*request)) {
	for r := e.head; r != nil; r = r.next {
		f(r)
	}
}

// Why a request was rejected, as upstream's apiserver_flowcontrol_rejected_requests_total
// labels it. A request that gave up waiting is "time-out" whether its wait limit
// passed or its client left, as upstream's.
const (
	rejectQueueFull  = "queue-full"
	rejectConcurrent = "concurrency-limit"
	rejectTimeout    = "time-out"
)

// configure sets the level's limits; queued and executing requests are dealt to the
// new queues if their number changed, and as many start as the new limit allows.
// A new level starts with its nominal seats less half what it may lend, as
// upstream's, until the adjustment that follows every configuration.
func (l *level) configure(pl *flowcontrolv1.PriorityLevelConfiguration, exempt bool, nominal, lower, upper int, reject bool, queues, handSize, queueLengthLimit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if reject || exempt {
		queues = 0
	}
	if l.pl == nil {
		l.limit = nominal - (nominal-lower)/2
		l.demand.reset(now)
		l.lastSync = now
	}
	l.syncTimeLocked(now)
	l.pl = pl
	l.exempt, l.reject = exempt, reject
	l.nominal, l.lower, l.upper = nominal, lower, upper
	l.maxSeats.Store(int32(levelMaxSeats(nominal, handSize, !reject && !exempt && queues > 0)))
	l.handSize, l.queueLengthLimit = max(handSize, 1), queueLengthLimit
	l.waitingDenominator = float64(max(queueLengthLimit, 1) * max(queues, 1))
	l.showWaitingLocked(now)
	if len(l.queues) != queues {
		l.redealLocked(queues)
	}
	l.dispatchLocked(now)
}

// redealLocked replaces the queues by n new ones and deals every request, waiting or
// executing, to the queue its flow gets among them (executing ones to the level's
// queueless list when there are no queues). Seats still held after a request's
// handler returned stay the level's, no queue's.
func (l *level) redealLocked(n int) {
	var waiting, executing []*request
	for _, q := range l.queues {
		waiting = append(waiting, q.waiting...)
		q.executing.each(func(r *request) { executing = append(executing, r) })
		q.gone = true
	}
	l.queueless.each(func(r *request) { executing = append(executing, r) })
	l.queues = make([]*queue, n)
	for i := range l.queues {
		l.queues[i] = &queue{}
	}
	l.queueless = execList{}
	l.robin, l.activeQueues, l.queuedSeats = 0, 0, 0
	for _, r := range executing {
		r.list = nil
		l.startOnLocked(r, l.homeLocked(r.flow))
	}
	if n == 0 && len(waiting) > 0 {
		// The level no longer queues: those that waited are served as seats free
		// up, in arrival order, from one queue that takes no newcomers.
		l.queues = []*queue{{}}
	}
	for _, r := range waiting {
		q := l.chooseQueueLocked(r.flow)
		l.startVirtualLocked(q)
		l.enqueueLocked(q, r)
		boundNextDispatchLocked(q)
	}
}

// homeLocked is the queue a request of the flow starting at once executes from: the
// one its hand of queues gives it, as upstream's, or none on a level without queues.
func (l *level) homeLocked(flow uint64) *queue {
	if l.reject || l.exempt || len(l.queues) == 0 {
		return nil
	}
	return l.chooseQueueLocked(flow)
}

// startOnLocked makes r execute from q (the level's own list if nil).
func (l *level) startOnLocked(r *request, q *queue) {
	if q == nil {
		r.q = nil
		l.queueless.add(r)
		return
	}
	l.startVirtualLocked(q)
	l.executeLocked(q, r)
}

// seatsFor is what a request estimated at the given seats takes of the level: at
// least one, at most the level's maximum.
func (l *level) seatsFor(estimate int) int {
	return max(1, min(estimate, int(l.maxSeats.Load())))
}

// fitsLocked: a request of the given seats may start now. As upstream's, a request
// asking for more than the whole limit runs when nothing else executes.
func (l *level) fitsLocked(seats int) bool {
	switch {
	case l.exempt:
		return true
	case seats > l.limit:
		return l.executing == 0
	}
	return l.seatsInUse+seats <= l.limit
}

// startLocked makes the request hold its seats, executing from q (nil: the level's
// own list), and charges q its work in virtual time.
func (l *level) startLocked(r *request, q *queue, now time.Time) {
	r.start = now
	l.startOnLocked(r, q)
	if q != nil {
		q.nextDispatchR += r.totalWork
		boundNextDispatchLocked(q)
	}
	l.executing++
	l.seatsInUse += r.seats
	l.dispatched++
	l.noteDemandLocked(now)
	l.showExecutingLocked(now)
	l.showSeatsLocked(now)
	r.noteExecutingSeats(r.seats)
}

// noteExecutingSeats shows a change of the seats the request holds on /metrics.
func (r *request) noteExecutingSeats(delta int) {
	if r.metrics != nil {
		r.metrics.executingSeats.get().Add(float64(delta))
	}
}

// noteEnqueued shows that the request joined a queue, n long with it: its length,
// and its schema's in-queue series made (as upstream's, which enqueues every request
// of a queuing level, one it dispatches at once too).
func (r *request) noteEnqueued(n int) {
	if r.metrics != nil {
		r.metrics.queueLength.get().Observe(float64(n))
		r.metrics.inQueue.get()
		r.metrics.inQueueSeats.get()
	}
}

// noteDemandLocked feeds the integrator the level's seat demand after a change.
func (l *level) noteDemandLocked(now time.Time) {
	if x := float64(l.seatsInUse + l.seatsWaiting); x != l.demand.x {
		l.demand.set(now, x)
		l.showDemandLocked(now)
	}
}

// The show*Locked methods show, after a change, the demand, the seats in use, the
// requests executing and waiting, each over its denominator, on /metrics.

func (l *level) showDemandLocked(now time.Time) {
	if l.series != nil {
		l.series.demand.set(now, l.demand.x/l.concurrencyDenominator)
	}
}

func (l *level) showSeatsLocked(now time.Time) {
	if l.series != nil {
		l.series.seats.set(now, float64(l.seatsInUse)/l.concurrencyDenominator)
	}
}

func (l *level) showExecutingLocked(now time.Time) {
	if l.series != nil {
		l.series.executing.set(now, float64(l.executing)/l.concurrencyDenominator)
	}
}

func (l *level) showWaitingLocked(now time.Time) {
	if l.series != nil {
		l.series.waiting.set(now, float64(l.waiting)/l.waitingDenominator)
	}
}

// setLimit gives the level its seats for the coming period, and the denominator its
// demand, seats and requests executing are shown over; as many requests start as a
// raised limit lets.
func (l *level) setLimit(limit, concurrencyDenominator int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.syncTimeLocked(now)
	l.limit = limit
	l.concurrencyDenominator = float64(concurrencyDenominator)
	l.showDemandLocked(now)
	l.showSeatsLocked(now)
	l.showExecutingLocked(now)
	l.dispatchLocked(now)
}

// acquire takes the request's seats, queueing it while they are not free, for at most
// waitLimit or until ctx ends (the client gone); queued is called when it joins a
// queue. It returns how long the request waited, and the reason when it was rejected
// (then no seat is held).
func (l *level) acquire(ctx context.Context, r *request, waitLimit time.Duration, queued func()) (time.Duration, string) {
	l.mu.Lock()
	started, reason := l.admitLocked(r)
	l.mu.Unlock()
	if started || reason != "" {
		return 0, reason
	}
	queued()

	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	select {
	case <-r.ready:
	case <-limit.C:
	case <-ctx.Done():
	}
	// However the wait ended, the level syncs its virtual time and shows it, as
	// upstream's queueset does as each request's wait ends: one dispatched from its
	// queue too, once it gets to run (R has moved on since the dispatch showed it).
	// Upstream's syncs so also for a request it dispatched at once, in the same
	// goroutine straight after: that is left out here, R then differing from the
	// admission's by nanoseconds, for a lock on every request.
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.syncTimeLocked(now)
	if r.dispatched {
		return r.start.Sub(r.arrive), "" // the seat came, perhaps as the wait ended: use it
	}
	q := r.q
	l.unqueueLocked(q, r)
	boundNextDispatchLocked(q)
	l.waiting--
	l.seatsWaiting -= r.seats
	l.noteDemandLocked(now)
	l.showWaitingLocked(now)
	l.rejected++
	l.cancelled++
	// The request gone may have been what blocked the others.
	l.dispatchLocked(now)
	return now.Sub(r.arrive), rejectTimeout
}

// admitLocked starts the request if nothing waits and its seats are free, queues it
// otherwise (started false, no reason), or says why it is turned away.
func (l *level) admitLocked(r *request) (started bool, reason string) {
	if r.initialSeats < 1 {
		r.setWork(1, r.finalSeats, r.additionalLatency)
	}
	now := l.now()
	l.syncTimeLocked(now)
	r.arrive = now
	if l.waiting == 0 && l.fitsLocked(r.seats) {
		q := l.homeLocked(r.flow)
		if q != nil {
			// Upstream queues every request of a queuing level, then dispatches:
			// this one would have found its queue empty, and raised its S to the
			// R it arrived at.
			l.startVirtualLocked(q)
			q.nextDispatchR = max(q.nextDispatchR, l.currentR)
			r.noteEnqueued(1)
			l.showDispatchLocked(q)
		}
		l.startLocked(r, q, now)
		return true, ""
	}
	if l.reject {
		l.rejected++
		return false, rejectConcurrent
	}
	q := l.chooseQueueLocked(r.flow)
	// As upstream's, a full queue turns a request away only while the seats are all
	// taken (not while a wide request waits for them to be).
	if l.seatsInUse >= l.limit && len(q.waiting) >= l.queueLengthLimit {
		l.rejected++
		return false, rejectQueueFull
	}
	r.ready, r.arrivalR = make(chan struct{}), l.currentR
	l.startVirtualLocked(q)
	l.enqueueLocked(q, r)
	r.noteEnqueued(len(q.waiting))
	boundNextDispatchLocked(q)
	l.waiting++
	l.seatsWaiting += r.seats
	l.noteDemandLocked(now)
	l.showWaitingLocked(now)
	l.dispatchLocked(now)
	return r.dispatched, ""
}

// release ends the request: its queue is charged what it really took instead of the
// estimate, and its seats go to the requests waiting next, at once or, if it keeps
// final seats, after its additional latency. It reports whether the level is
// quiescing and now holds nothing (it can go).
func (l *level) release(r *request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.syncTimeLocked(now)
	r.ran = now.Sub(r.start)
	if q := r.q; q != nil {
		l.finishLocked(q, r)
		q.nextDispatchR += seatsTimes(float64(r.initialSeats), now.Sub(r.start))
		q.nextDispatchR -= seatsTimes(float64(r.initialSeats), estimatedServiceTime)
		boundNextDispatchLocked(q)
	} else {
		l.queueless.remove(r)
	}
	l.executing--
	l.showExecutingLocked(now)
	if r.finalSeats > 0 && r.additionalLatency > 0 {
		l.after(r.additionalLatency, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			now := l.now()
			l.syncTimeLocked(now)
			l.freeSeatsLocked(r, now)
		})
	} else {
		l.freeSeatsLocked(r, now)
	}
	if l.reject && l.waiting == 0 && len(l.queues) > 0 {
		l.redealLocked(0) // what waited when the level stopped queueing is done
	}
	return l.quiescing && l.idleLocked()
}

// freeSeatsLocked gives back the seats of a request that is done, and starts what
// they let start.
func (l *level) freeSeatsLocked(r *request, now time.Time) {
	if r.q != nil {
		l.freeQueueSeatsLocked(r.q, r)
	}
	l.seatsInUse -= r.seats
	l.noteDemandLocked(now)
	l.showSeatsLocked(now)
	r.noteExecutingSeats(-r.seats)
	l.dispatchLocked(now)
}

// dispatchLocked starts waiting requests while seats are free, the head of the queue
// that finishes first in virtual time each (fairqueue.go), until one does not fit.
func (l *level) dispatchLocked(now time.Time) {
	for l.waiting > 0 {
		q, idx := l.nextQueueLocked()
		r := q.waiting[0]
		if !l.fitsLocked(r.seats) {
			if l.seatsInUse < l.limit && r.metrics != nil {
				// As upstream's, a dispatch that found seats free, but not enough.
				r.metrics.noAccommodation.get().Inc()
			}
			return
		}
		l.robin = idx
		l.showDispatchLocked(q)
		l.unqueueLocked(q, r)
		l.waiting--
		l.seatsWaiting -= r.seats
		l.showWaitingLocked(now)
		if r.finalSeats > l.limit && l.limit > 0 {
			// More final seats than the level has: as upstream's, hold them all
			// for proportionally longer.
			work := seatsTimes(float64(r.finalSeats), r.additionalLatency)
			r.finalSeats, r.additionalLatency = l.limit, work.perSeat(float64(l.limit))
			r.seats = max(r.initialSeats, r.finalSeats)
		}
		l.startLocked(r, q, now)
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

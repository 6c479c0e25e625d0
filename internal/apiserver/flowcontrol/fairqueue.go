package flowcontrol

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Fair queuing by virtual finish time, as upstream's queueset does it.
//
// Each queuing level keeps a virtual clock R (seat-seconds): it advances, while some
// queue holds requests, at min(seats asked for, limit) / (queues holding requests)
// per real second, i.e. the service each busy queue would get if the seats were
// shared equally among them. A request is charged its work: its initial seats times
// estimatedServiceTime, plus its final seats times its additional latency. A queue's
// nextDispatchR is the virtual time at which its next request would start: set to R
// when a request arrives at a queue holding nothing, raised by each request's work as
// it is dispatched, corrected by what the request really took once it ends (its
// initial seats times the real duration instead of the estimate), and never below its
// head's arrival R (a queue does not bank service it did not ask for; a request that
// starts at once, with nothing waiting, counts as its head as it arrives, since
// upstream's queues it before dispatching it).
//
// When seats free up the level dispatches the head of the queue whose head would
// finish first in virtual time (nextDispatchR plus the head's work; ties go round
// robin). If that request does not fit the free seats, nothing else is dispatched
// until it does: a wide request is not starved by narrower ones behind it. So a flow
// sending requests of k seats gets about 1/k of the dispatches a flow of 1-seat
// requests gets, the same seat-seconds.

// seatSeconds is work or virtual time, in units of 1e-8 seat-seconds (upstream's fixed
// point, which its dumps print).
type seatSeconds uint64

const seatSecondsScale = 100_000_000

// seatsTimes is the work of holding seats for d.
func seatsTimes(seats float64, d time.Duration) seatSeconds {
	return seatSeconds(int64(math.Round(seats * float64(d) / (1e9 / seatSecondsScale))))
}

// perSeat is how long the work keeps the given number of seats.
func (ss seatSeconds) perSeat(seats float64) time.Duration {
	return time.Duration(float64(ss) / seats * (1e9 / seatSecondsScale))
}

// String is upstream's format: seat-seconds to 8 decimals, then "ss".
func (ss seatSeconds) String() string {
	frac := strconv.FormatUint(uint64(ss%seatSecondsScale), 10)
	return strconv.FormatUint(uint64(ss/seatSecondsScale), 10) + "." + strings.Repeat("0", 8-len(frac)) + frac + "ss"
}

// estimatedServiceTime is the duration every request's initial seats are charged at
// until it ends (upstream's).
const estimatedServiceTime = 3 * time.Millisecond

// R is shifted back by rDecrement when it reaches highR, with every queue's and
// waiting request's virtual times, so that it never wraps (after years at most).
const (
	rDecrement = seatSeconds(math.MaxUint64 / 2)
	highR      = rDecrement + rDecrement/2
)

// active: the queue holds a request waiting or executing (its seats lingering after a
// request ended do not count).
func (q *queue) active() bool { return len(q.waiting) > 0 || q.executing.count > 0 }

// float is the seat-seconds as a number, as upstream's gauges show them.
func (ss seatSeconds) float() float64 { return float64(ss) / seatSecondsScale }

// syncTimeLocked advances the level's virtual time to now, and shows it: upstream's
// queueset sets current_r whenever it syncs its virtual time, as it is configured, as
// a request arrives, as its wait ends and as it finishes. Every change of R goes
// through here.
func (l *level) syncTimeLocked(now time.Time) {
	l.advanceRLocked(now)
	if l.series != nil {
		l.series.currentR.Set(l.currentR.float())
	}
}

// advanceRLocked advances R over the time since the last sync at the rate its queues
// held since then.
func (l *level) advanceRLocked(now time.Time) {
	dt := now.Sub(l.lastSync)
	l.lastSync = now
	if dt <= 0 || l.activeQueues == 0 {
		return
	}
	rate := float64(min(l.queuedSeats, l.limit)) / float64(l.activeQueues)
	l.currentR += seatsTimes(rate, dt)
	if l.currentR >= highR {
		l.currentR -= rDecrement
		// An active queue's virtual times are at least the R it became active at;
		// one that has stayed active since before R reached rDecrement would wrap
		// (upstream's "underflow", its epoch advance unsuccessful).
		success := true
		for _, q := range l.queues {
			if !q.active() {
				q.nextDispatchR = 0
				continue
			}
			success = success && q.nextDispatchR >= rDecrement
			q.nextDispatchR -= rDecrement
			for _, r := range q.waiting {
				success = success && r.arrivalR >= rDecrement
				r.arrivalR -= rDecrement
			}
		}
		if l.series != nil {
			l.series.epochAdvanced(success)
		}
	}
}

// chooseQueueLocked is the queue a request of the flow joins: of the queues its hand
// deals it (shuffle sharding), the one with the least work waiting, as upstream's;
// ties go to the next in the hand each time. Nil on a level without queues.
func (l *level) chooseQueueLocked(flow uint64) *queue {
	if len(l.queues) == 0 {
		return nil
	}
	var small [8]int
	hand := small[:0]
	dealHand(flow, len(l.queues), l.handSize, func(i int) { hand = append(hand, i) })
	offset := l.enqueues % len(hand)
	l.enqueues++
	var best *queue
	for i := range hand {
		q := l.queues[hand[(offset+i)%len(hand)]]
		if best == nil || q.waitingWork < best.waitingWork {
			best = q
		}
	}
	return best
}

// nextQueueLocked is the queue whose head finishes first in virtual time, looking
// from the one after the last dispatched from, so that ties go round robin.
func (l *level) nextQueueLocked() (*queue, int) {
	var best *queue
	bestIndex := -1
	var bestFinish seatSeconds
	for i := range l.queues {
		idx := (l.robin + 1 + i) % len(l.queues)
		q := l.queues[idx]
		if len(q.waiting) == 0 {
			continue
		}
		if finish := q.nextDispatchR + q.waiting[0].totalWork; best == nil || finish < bestFinish {
			best, bestIndex, bestFinish = q, idx, finish
		}
	}
	return best, bestIndex
}

// showDispatchLocked shows a dispatch of the head of q, as upstream's queueset does
// before it charges the request's work: R, q's S, and the least and greatest S over
// the queues with a request waiting (q counts: its head is the request), also less
// each queue's estimated work in progress, its seats in use times
// estimatedServiceTime. The difference is unsigned, as upstream's: it wraps when the
// work in progress exceeds S.
func (l *level) showDispatchLocked(q *queue) {
	if l.series == nil {
		return
	}
	sMin, sMax := q.nextDispatchR, q.nextDispatchR
	dMin := q.discountedS()
	dMax := dMin
	if l.waiting > 0 {
		for _, o := range l.queues {
			if o != q && len(o.waiting) > 0 {
				ds := o.discountedS()
				sMin, sMax = min(sMin, o.nextDispatchR), max(sMax, o.nextDispatchR)
				dMin, dMax = min(dMin, ds), max(dMax, ds)
			}
		}
	}
	d := l.series.dispatch.get()
	d.r.Set(l.currentR.float())
	d.s.Set(q.nextDispatchR.float())
	d.sMin.Set(sMin.float())
	d.sMax.Set(sMax.float())
	d.discountedMin.Set(dMin.float())
	d.discountedMax.Set(dMax.float())
}

// discountedS is the queue's S less its estimated work in progress.
func (q *queue) discountedS() seatSeconds {
	return q.nextDispatchR - seatsTimes(float64(q.seatsInUse), estimatedServiceTime)
}

// boundNextDispatchLocked keeps a queue's virtual start no earlier than its head's
// arrival, so that an idle spell is not saved up as credit.
func boundNextDispatchLocked(q *queue) {
	if len(q.waiting) > 0 && q.nextDispatchR < q.waiting[0].arrivalR {
		q.nextDispatchR = q.waiting[0].arrivalR
	}
}

// startVirtualLocked starts a queue's virtual clock at R when a request comes to it
// holding nothing.
func (l *level) startVirtualLocked(q *queue) {
	if !q.active() {
		q.nextDispatchR = l.currentR
	}
}

// The queue bookkeeping below keeps, besides each queue's lists and sums, the level's
// count of active queues and sum of queued seats, which R advances by.

// enqueueLocked appends a waiting request to q.
func (l *level) enqueueLocked(q *queue, r *request) {
	if !q.active() {
		l.activeQueues++
	}
	r.q = q
	q.waiting = append(q.waiting, r)
	q.waitingInitial += r.initialSeats
	q.waitingSeats += r.seats
	q.waitingWork += r.totalWork
	l.queuedSeats += r.seats
}

// unqueueLocked removes a waiting request from q (the head, or one giving up).
func (l *level) unqueueLocked(q *queue, r *request) {
	if len(q.waiting) > 0 && q.waiting[0] == r {
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
	} else {
		q.remove(r)
	}
	q.waitingInitial -= r.initialSeats
	q.waitingSeats -= r.seats
	q.waitingWork -= r.totalWork
	l.queuedSeats -= r.seats
	if !q.active() {
		l.activeQueues--
	}
}

// executeLocked makes r execute from q, holding its seats there.
func (l *level) executeLocked(q *queue, r *request) {
	if !q.active() {
		l.activeQueues++
	}
	r.q = q
	q.executing.add(r)
	q.seatsInUse += r.seats
	l.queuedSeats += r.seats
}

// finishLocked takes r off q's executing list; its seats stay until freed.
func (l *level) finishLocked(q *queue, r *request) {
	q.executing.remove(r)
	if !q.active() {
		l.activeQueues--
	}
}

// freeQueueSeatsLocked gives back r's seats in q (unless q was replaced meanwhile).
func (l *level) freeQueueSeatsLocked(q *queue, r *request) {
	if q.gone {
		return
	}
	q.seatsInUse -= r.seats
	l.queuedSeats -= r.seats
}

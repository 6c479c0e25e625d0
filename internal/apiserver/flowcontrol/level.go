package flowcontrol

import (
	"context"
	"sync"
	"time"
)

// level is one priority level's seats and queues. It outlives configuration changes
// (its limits are updated in place), so that requests in flight and waiting keep
// their places.
type level struct {
	name string

	mu sync.Mutex
	// exempt levels run everything at once.
	exempt bool
	// limit is the level's nominal concurrency: the seats its requests may hold.
	limit int
	// reject: the level does not queue; a request without a free seat is rejected.
	reject           bool
	handSize         int
	queueLengthLimit int
	queues           []*queue
	executing        int
	waiting          int
	// next is where the round robin over the queues resumes.
	next int
}

type queue struct {
	waiting []*waiter
}

// waiter is a request in a queue. ready is closed once it holds a seat.
type waiter struct {
	flow  uint64
	ready chan struct{}
	// dispatched is set, under the level's lock, with the seat.
	dispatched bool
	q          *queue
}

// Why a request was rejected, as upstream's apiserver_flowcontrol_rejected_requests_total
// labels it.
const (
	rejectQueueFull  = "queue-full"
	rejectConcurrent = "concurrency-limit"
	rejectTimeout    = "time-out"
	rejectCancelled  = "cancelled"
)

// configure sets the level's limits; queued requests are dealt to the new queues if
// their number changed, and as many start as the new limit allows.
func (l *level) configure(exempt bool, limit int, reject bool, queues, handSize, queueLengthLimit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exempt, l.limit, l.reject = exempt, limit, reject
	l.handSize, l.queueLengthLimit = max(handSize, 1), queueLengthLimit
	queues = max(queues, 1)
	if len(l.queues) != queues {
		old := l.queues
		l.queues = make([]*queue, queues)
		for i := range l.queues {
			l.queues[i] = &queue{}
		}
		l.next = 0
		for _, q := range old {
			for _, w := range q.waiting {
				nq := l.shortestInHand(w.flow)
				w.q = nq
				nq.waiting = append(nq.waiting, w)
			}
		}
	}
	l.dispatchLocked()
}

// acquire takes a seat for a request of the given flow, queueing it while none is
// free, for at most waitLimit or until ctx ends (the client gone); queued is called
// when it joins a queue. It returns how long the request waited, and the reason when
// it was rejected (then no seat is held).
func (l *level) acquire(ctx context.Context, flow uint64, waitLimit time.Duration, queued func()) (time.Duration, string) {
	l.mu.Lock()
	if l.exempt || (l.executing < l.limit && l.waiting == 0) {
		l.executing++
		l.mu.Unlock()
		return 0, ""
	}
	if l.reject {
		l.mu.Unlock()
		return 0, rejectConcurrent
	}
	q := l.shortestInHand(flow)
	if len(q.waiting) >= l.queueLengthLimit {
		l.mu.Unlock()
		return 0, rejectQueueFull
	}
	w := &waiter{flow: flow, ready: make(chan struct{}), q: q}
	q.waiting = append(q.waiting, w)
	l.waiting++
	l.mu.Unlock()
	queued()

	start := time.Now()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	reason := rejectTimeout
	select {
	case <-w.ready:
		return time.Since(start), ""
	case <-limit.C:
	case <-ctx.Done():
		reason = rejectCancelled
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.dispatched {
		return time.Since(start), "" // the seat came as the wait ended: use it
	}
	w.q.remove(w)
	l.waiting--
	return time.Since(start), reason
}

// release frees a seat and gives it to the next request waiting.
func (l *level) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.executing--
	l.dispatchLocked()
}

// dispatchLocked starts waiting requests while seats are free, taking the queues in
// turn so that each flow's queue gets its share whatever the others hold.
func (l *level) dispatchLocked() {
	for l.waiting > 0 && (l.exempt || l.executing < l.limit) {
		for i := 0; i < len(l.queues); i++ {
			q := l.queues[(l.next+i)%len(l.queues)]
			if len(q.waiting) == 0 {
				continue
			}
			w := q.waiting[0]
			q.waiting[0] = nil
			q.waiting = q.waiting[1:]
			l.next = (l.next + i + 1) % len(l.queues)
			l.waiting--
			l.executing++
			w.dispatched = true
			close(w.ready)
			break
		}
	}
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

func (q *queue) remove(w *waiter) {
	for i, x := range q.waiting {
		if x == w {
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

package kubelet

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// podWorkers keeps one worker per pod. A worker syncs its pod whenever poked (informer
// event, runtime change, probe result, its timer); pokes while it is busy collapse into
// one more sync. A worker ends when its pod is gone from both the API and the runtime.
// A worker's goroutine runs only while it has syncs to do and ends when it is idle, the
// next poke starting another: a node's pods are mostly idle between syncs a minute
// apart, and an idle goroutine per pod holds a stack (~4 KiB) that every garbage
// collection scans (the hollow nodes' one process has 30,000).
//
// Each worker has one timer, set after every sync to the earliest of the wakes that
// sync (or an earlier one) asked for through pokeAfter (a back-off's end, a retry, the
// active deadline, a token's refresh) and the pod's periodic resync, as upstream's pod
// workers requeue a pod after each sync. Anything that must happen at a given time
// asks for it: the periodic resync, a minute, is only the backstop.
//
// Workers are independent: one pod's sync never waits for another's, except for a slot
// of the start gate. So that a pod deleted while it was starting does not hold a slot
// (nor its worker) for the rest of a start nobody wants, its deletion cancels the sync
// that is starting it, as upstream's pod workers cancel a running sync when the pod is
// to be killed; the next sync then tears the pod down.
type podWorkers struct {
	ctx     context.Context
	kl      *Kubelet
	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup // the workers' running goroutines
	// startMu orders the goroutines' starts before wait's wg.Wait: stopped is set
	// under it, and a start checks it and adds to wg under it.
	startMu sync.RWMutex
	stopped bool
}

type podWorker struct {
	uid    types.UID
	key    string // namespace/name
	poke   chan struct{}
	state  *podState
	parent context.Context
	owner  *podWorkers
	// running says the worker's goroutine is running (or the worker has ended, or the
	// kubelet is stopping, and none may start again); set by whoever starts it.
	running atomic.Bool

	// Guarded by podWorkers.mu: cancel ends the sync in progress, if any; live says
	// that sync is running the pod (may be cancelled by its termination), not tearing
	// it down; terminating is set once the pod is deleted or being deleted.
	cancel      context.CancelFunc
	live        bool
	terminating bool

	// Guarded by podWorkers.mu: wakeAt is the earliest wake asked for and not yet
	// reached (zero if none); timer is the worker's one timer, due at timerAt.
	wakeAt  time.Time
	timer   clock.Timer
	timerAt time.Time

	// deleted is set, by the worker's own goroutine, once the pod's final DELETE
	// (grace 0, after its containers stopped) has been answered: a sync woken again
	// before the watch removes the pod (by the status just written, say) has nothing
	// to send. Upstream's status manager sends that DELETE once too.
	deleted bool
}

func newPodWorkers(ctx context.Context, kl *Kubelet) *podWorkers {
	return &podWorkers{ctx: ctx, kl: kl, workers: map[types.UID]*podWorker{}}
}

// dispatch pokes the pod's worker, starting one if needed.
func (p *podWorkers) dispatch(uid types.UID, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		if p.ctx.Err() != nil {
			return
		}
		w = &podWorker{uid: uid, key: key, poke: make(chan struct{}, 1), state: newPodState(), parent: p.ctx, owner: p}
		p.workers[uid] = w
	}
	w.wake()
}

// wake pokes the worker and starts its goroutine unless one is running. It takes no
// lock of the workers: the worker's timer calls it, and a fake clock runs timers under
// its own lock, which Stop (called under p.mu) takes.
func (w *podWorker) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
	p := w.owner
	if !w.running.CompareAndSwap(false, true) {
		return
	}
	p.startMu.RLock()
	defer p.startMu.RUnlock()
	if p.stopped {
		return // the kubelet is stopping; running stays set
	}
	p.wg.Add(1)
	go p.run(w)
}

// poke wakes an existing worker; it reports false if there is none.
func (p *podWorkers) poke(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if ok {
		w.wake()
	}
	return ok
}

// evict marks the pod's worker to evict its pod on its next sync, and wakes it; a pod
// already marked keeps its first eviction.
func (p *podWorkers) evict(uid types.UID, e evictionRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[uid]; ok {
		w.state.setEviction(e)
		w.wake()
	}
}

// terminate records that the pod is deleted or being deleted, cancels the sync that is
// running it, if one is, and wakes its worker to tear it down.
func (p *podWorkers) terminate(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return
	}
	w.terminating = true
	if w.live && w.cancel != nil {
		w.cancel()
	}
	w.wake()
}

// runsLive marks the worker's current sync as one that runs the pod: the pod's
// termination cancels it from now on, or at once if the termination came first.
func (p *podWorkers) runsLive(w *podWorker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.live = true
	if w.terminating && w.cancel != nil {
		w.cancel()
	}
}

// pokeAfter wakes the pod's worker after d on the kubelet's clock (back-off expiry,
// retries, deadlines). Many calls cost one timer: the earliest wake wins, and it is
// kept until a sync starts at or after it, so that a sync poked earlier by something
// else does not lose it.
func (p *podWorkers) pokeAfter(uid types.UID, d time.Duration) {
	now := p.kl.clock.Now()
	at := now.Add(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return
	}
	if w.wakeAt.IsZero() || at.Before(w.wakeAt) {
		w.wakeAt = at
	}
	if w.cancel == nil && (w.timer == nil || at.Before(w.timerAt)) {
		p.setTimer(w, at, now) // not syncing: nothing else sets the timer before the next sync
	}
}

// Periodic resync: each pod is synced again resyncPeriod ±25% after its last sync. The
// jitter spreads the pods of a kubelet that started them all at once (a restart, 25,000
// hollow pods listed together) over half a period instead of one burst per period, and
// as each pod's sync moments drift independently from then on, the spread only widens.
// The mean stays the period (upstream adds 0 to +50%: a mean of 1.25 periods and up to
// 1.5), so a change seen only on the periodic sync (a trust bundle's content, a
// PersistentVolume read through the object cache) is at most 1.25 periods late.
const resyncJitter = 0.25

// resyncDelay is the time to a pod's next periodic sync.
func (p *podWorkers) resyncDelay() time.Duration {
	period := p.kl.opts.ResyncPeriod
	return time.Duration(float64(period) * (1 - resyncJitter + 2*resyncJitter*rand.Float64()))
}

// requeue sets the worker's timer after a sync: to its periodic resync, or to the wake
// asked for if that is sooner.
func (p *podWorkers) requeue(w *podWorker) {
	now := p.kl.clock.Now()
	at := now.Add(p.resyncDelay())
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.wakeAt.IsZero() && w.wakeAt.Before(at) {
		at = w.wakeAt
	}
	p.setTimer(w, at, now)
}

// setTimer makes the worker's timer fire at at; the caller holds p.mu. The timer's
// function takes no lock: a fake clock runs it under its own lock, which Stop takes.
// A new timer rather than Reset: the fake clock's AfterFunc timer blocks when reset
// after it fired once.
func (p *podWorkers) setTimer(w *podWorker, at, now time.Time) {
	p.stopTimerLocked(w)
	w.timerAt = at
	w.timer = p.kl.clock.AfterFunc(at.Sub(now), w.wake)
}

// has reports whether a worker exists for the pod.
func (p *podWorkers) has(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

// run syncs the worker's pod while it has pokes, and returns when it has none left
// (its next wake starts another goroutine), when its pod is done, or when ctx ends.
func (p *podWorkers) run(w *podWorker) {
	defer p.wg.Done()
	for {
		if p.ctx.Err() != nil {
			return // wait stops the workers' timers and probes
		}
		select {
		case <-w.poke:
		default:
			// Idle. A wake between the empty poke and clearing running started no
			// goroutine: if it left a poke, this one goes on unless another started.
			w.running.Store(false)
			if len(w.poke) == 0 || !w.running.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		now := p.kl.clock.Now()
		p.mu.Lock()
		w.cancel, w.live = cancel, false
		if !w.wakeAt.IsZero() && !now.Before(w.wakeAt) {
			w.wakeAt = time.Time{} // this sync is the wake asked for
		}
		p.mu.Unlock()
		done, err := p.kl.syncPod(ctx, w)
		p.mu.Lock()
		w.cancel, w.live = nil, false
		p.mu.Unlock()
		cancelled := ctx.Err() != nil
		cancel()
		if cancelled && p.ctx.Err() == nil {
			// Stopped for the pod's termination: tear it down now, without a retry delay.
			w.wake()
			continue
		}
		if err != nil && p.ctx.Err() == nil {
			p.kl.log.Error("syncing pod", "pod", w.key, "uid", w.uid, "err", err)
			p.pokeAfter(w.uid, time.Second)
		}
		if done {
			p.mu.Lock()
			if len(w.poke) == 0 {
				// The worker ends; running stays set, so that nothing starts it again.
				delete(p.workers, w.uid)
				p.stopTimerLocked(w)
				p.mu.Unlock()
				w.state.stopProbes()
				return
			}
			p.mu.Unlock()
		}
		p.requeue(w)
	}
}

// stopTimerLocked stops the worker's timer, if it has one; the caller holds p.mu.
func (p *podWorkers) stopTimerLocked(w *podWorker) {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// wait blocks until every worker's goroutine has returned (after ctx ended), none
// starting from then on, and stops the remaining workers' timers and probes.
func (p *podWorkers) wait() {
	p.startMu.Lock()
	p.stopped = true
	p.startMu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	remaining := make([]*podWorker, 0, len(p.workers))
	for _, w := range p.workers {
		p.stopTimerLocked(w)
		remaining = append(remaining, w)
	}
	p.mu.Unlock()
	for _, w := range remaining {
		w.state.stopProbes()
	}
}

// ctx is the context every goroutine of this pod derives from.
func (w *podWorker) ctx() context.Context { return w.parent }

package kubelet

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// podWorkers runs one goroutine per pod. A worker syncs its pod whenever poked (informer
// event, runtime change, timer, periodic resync); pokes while it is busy collapse into
// one more sync. A worker ends when its pod is gone from both the API and the runtime.
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
	wg      sync.WaitGroup
}

type podWorker struct {
	uid    types.UID
	key    string // namespace/name
	poke   chan struct{}
	state  *podState
	parent context.Context

	// Guarded by podWorkers.mu: cancel ends the sync in progress, if any; live says
	// that sync is running the pod (may be cancelled by its termination), not tearing
	// it down; terminating is set once the pod is deleted or being deleted.
	cancel      context.CancelFunc
	live        bool
	terminating bool

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
		w = &podWorker{uid: uid, key: key, poke: make(chan struct{}, 1), state: newPodState(), parent: p.ctx}
		p.workers[uid] = w
		p.wg.Add(1)
		go p.run(w)
	}
	w.wake()
}

func (w *podWorker) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
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

func (p *podWorkers) pokeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
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

// pokeAfter wakes the worker after d on the kubelet's clock (back-off expiry, retries).
func (p *podWorkers) pokeAfter(c clock.WithDelayedExecution, uid types.UID, d time.Duration) {
	c.AfterFunc(d, func() { p.poke(uid) })
}

// has reports whether a worker exists for the pod.
func (p *podWorkers) has(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

func (p *podWorkers) run(w *podWorker) {
	defer p.wg.Done()
	defer w.state.stopProbes()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-w.poke:
		}
		ctx, cancel := context.WithCancel(p.ctx)
		p.mu.Lock()
		w.cancel, w.live = cancel, false
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
			p.pokeAfter(p.kl.clock, w.uid, time.Second)
		}
		if done {
			p.mu.Lock()
			if len(w.poke) == 0 {
				delete(p.workers, w.uid)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
		}
	}
}

// wait blocks until every worker has returned (after ctx ended).
func (p *podWorkers) wait() { p.wg.Wait() }

// ctx is the context every goroutine of this pod derives from.
func (w *podWorker) ctx() context.Context { return w.parent }

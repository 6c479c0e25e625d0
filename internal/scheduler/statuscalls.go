package scheduler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// podCalls runs a pod's API calls outside the scheduling loop, one after another per
// pod. A failed attempt's status patch (PodScheduled=False and the nomination) was made
// inside the loop: on a busy apiserver its round trip, not the filtering, was most of
// a preemptor's first attempt. Upstream moves the same calls out of the loop behind
// its SchedulerAsyncAPICalls gate. Per pod the calls keep their order, and a binding
// waits for the pod's earlier calls (wait), so a late PodScheduled=False never lands
// after the binding's PodScheduled=True.
type podCalls struct {
	mu   sync.Mutex
	last map[types.UID]chan struct{} // closed when the pod's latest call has ended
	wg   sync.WaitGroup
}

func newPodCalls() *podCalls { return &podCalls{last: map[types.UID]chan struct{}{}} }

// run starts fn after the pod's earlier calls end.
func (c *podCalls) run(uid types.UID, fn func()) {
	done := make(chan struct{})
	c.mu.Lock()
	prev := c.last[uid]
	c.last[uid] = done
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if prev != nil {
			<-prev
		}
		fn()
		close(done)
		c.mu.Lock()
		if c.last[uid] == done {
			delete(c.last, uid)
		}
		c.mu.Unlock()
	}()
}

// wait blocks until the pod's calls started so far have ended.
func (c *podCalls) wait(uid types.UID) {
	c.mu.Lock()
	ch := c.last[uid]
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

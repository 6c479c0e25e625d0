package hollow

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// podHub replaces the fake clientset's pod watches, whose fixed buffers panic when many
// busy kubelets fill them, with unbounded queues fed from the writes themselves.
type podHub struct {
	mu       sync.Mutex
	watchers []*queueWatch
}

// install makes the clientset's pod writes publish to the hub and its pod watches read
// from it.
func (h *podHub) install(c *k8sfake.Clientset) {
	tracker := c.Tracker()
	react := clienttesting.ObjectReaction(tracker)
	for verb, typ := range map[string]watch.EventType{"create": watch.Added, "update": watch.Modified, "delete": watch.Deleted} {
		c.PrependReactor(verb, "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
			var gone runtime.Object
			if d, ok := action.(clienttesting.DeleteAction); ok {
				gone, _ = tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
			}
			handled, obj, err := react(action)
			if err == nil {
				if gone != nil {
					obj = gone
				}
				if obj != nil {
					h.publish(watch.Event{Type: typ, Object: obj.DeepCopyObject()})
				}
			}
			return handled, obj, err
		})
	}
	c.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, h.watch(), nil
	})
}

func (h *podHub) watch() *queueWatch {
	w := &queueWatch{out: make(chan watch.Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	h.mu.Lock()
	h.watchers = append(h.watchers, w)
	h.mu.Unlock()
	return w
}

func (h *podHub) publish(ev watch.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.watchers {
		w.push(ev)
	}
}

// count is the number of watches opened so far.
func (h *podHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

type queueWatch struct {
	mu    sync.Mutex
	queue []watch.Event
	out   chan watch.Event
	wake  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (w *queueWatch) push(ev watch.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *queueWatch) run() {
	defer close(w.out)
	for {
		w.mu.Lock()
		var next *watch.Event
		if len(w.queue) > 0 {
			next = &w.queue[0]
		}
		w.mu.Unlock()
		if next == nil {
			select {
			case <-w.wake:
				continue
			case <-w.done:
				return
			}
		}
		select {
		case w.out <- *next:
			w.mu.Lock()
			w.queue = w.queue[1:]
			w.mu.Unlock()
		case <-w.done:
			return
		}
	}
}

func (w *queueWatch) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *queueWatch) ResultChan() <-chan watch.Event { return w.out }

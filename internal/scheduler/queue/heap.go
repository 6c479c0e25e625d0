package queue

import (
	"container/heap"

	"mizzen/internal/scheduler/framework"
)

// podHeap is a heap of queued pods addressable by key, so updates and deletes are O(log n).
type podHeap struct {
	items []*framework.QueuedPodInfo
	index map[string]int
	less  func(a, b *framework.QueuedPodInfo) bool
}

func newPodHeap(less func(a, b *framework.QueuedPodInfo) bool) *podHeap {
	return &podHeap{index: map[string]int{}, less: less}
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].Key()] = i
	h.index[h.items[j].Key()] = j
}
func (h *podHeap) Push(x any) {
	p := x.(*framework.QueuedPodInfo)
	h.index[p.Key()] = len(h.items)
	h.items = append(h.items, p)
}
func (h *podHeap) Pop() any {
	last := len(h.items) - 1
	p := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	delete(h.index, p.Key())
	return p
}

// AddOrUpdate inserts p or replaces the entry with the same key.
func (h *podHeap) AddOrUpdate(p *framework.QueuedPodInfo) {
	if i, ok := h.index[p.Key()]; ok {
		h.items[i] = p
		heap.Fix(h, i)
		return
	}
	heap.Push(h, p)
}

// Get returns the entry with key.
func (h *podHeap) Get(key string) (*framework.QueuedPodInfo, bool) {
	i, ok := h.index[key]
	if !ok {
		return nil, false
	}
	return h.items[i], true
}

// Delete removes the entry with key; it reports whether one existed.
func (h *podHeap) Delete(key string) bool {
	i, ok := h.index[key]
	if !ok {
		return false
	}
	heap.Remove(h, i)
	return true
}

// Peek returns the head without removing it.
func (h *podHeap) Peek() *framework.QueuedPodInfo {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// PopHead removes and returns the head.
func (h *podHeap) PopHead() *framework.QueuedPodInfo {
	if len(h.items) == 0 {
		return nil
	}
	return heap.Pop(h).(*framework.QueuedPodInfo)
}

// Package cache keeps the scheduler's view of nodes and the pods placed on them, fed by
// informers, including pods assumed on a node before their binding is confirmed, and
// produces cheap incremental snapshots for each scheduling cycle.
package cache

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"mizzen/internal/scheduler/framework"
)

type podState struct {
	pod *v1.Pod
	// bindingFinished is set once the bind call returned successfully.
	bindingFinished bool
}

type imageState struct {
	size  int64
	nodes sets.Set[string]
}

// Cache is safe for concurrent use. Exactly one Snapshot should be refreshed from it,
// because it tracks which nodes changed since the last refresh.
type Cache struct {
	mu          sync.RWMutex
	nodes       map[string]*framework.NodeInfo
	podStates   map[types.UID]*podState
	assumedPods sets.Set[types.UID]
	imageStates map[string]*imageState
	generation  int64
	// dirty names nodes changed since the last UpdateSnapshot.
	dirty map[string]struct{}
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		nodes:       map[string]*framework.NodeInfo{},
		podStates:   map[types.UID]*podState{},
		assumedPods: sets.New[types.UID](),
		imageStates: map[string]*imageState{},
		dirty:       map[string]struct{}{},
	}
}

func (c *Cache) touch(name string, ni *framework.NodeInfo) {
	c.generation++
	ni.Generation = c.generation
	c.dirty[name] = struct{}{}
}

func (c *Cache) nodeInfo(name string) *framework.NodeInfo {
	ni, ok := c.nodes[name]
	if !ok {
		ni = framework.NewNodeInfo()
		c.nodes[name] = ni
	}
	return ni
}

func (c *Cache) addPodLocked(pod *v1.Pod) {
	ni := c.nodeInfo(pod.Spec.NodeName)
	ni.AddPod(pod)
	c.touch(pod.Spec.NodeName, ni)
}

func (c *Cache) removePodLocked(pod *v1.Pod) {
	ni, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return
	}
	ni.RemovePod(pod)
	c.touch(pod.Spec.NodeName, ni)
	if ni.Node() == nil && len(ni.Pods) == 0 {
		delete(c.nodes, pod.Spec.NodeName)
	}
}

// AssumePod counts pod (with Spec.NodeName set) on its node before the bind is confirmed.
func (c *Cache) AssumePod(pod *v1.Pod) error {
	uid := framework.PodUID(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.podStates[uid]; ok {
		return fmt.Errorf("pod %s is already in the cache, so it cannot be assumed", framework.PodKey(pod))
	}
	c.addPodLocked(pod)
	c.podStates[uid] = &podState{pod: pod}
	c.assumedPods.Insert(uid)
	return nil
}

// FinishBinding records that the bind call for an assumed pod returned.
func (c *Cache) FinishBinding(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps, ok := c.podStates[framework.PodUID(pod)]; ok && c.assumedPods.Has(framework.PodUID(pod)) {
		ps.bindingFinished = true
	}
}

// ForgetPod undoes AssumePod after a failed bind.
func (c *Cache) ForgetPod(pod *v1.Pod) error {
	uid := framework.PodUID(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[uid]
	if !ok || !c.assumedPods.Has(uid) {
		return fmt.Errorf("pod %s is not assumed, so it cannot be forgotten", framework.PodKey(pod))
	}
	if ps.pod.Spec.NodeName != pod.Spec.NodeName {
		return fmt.Errorf("pod %s was assumed on %s but forgotten on %s", framework.PodKey(pod), ps.pod.Spec.NodeName, pod.Spec.NodeName)
	}
	c.removePodLocked(ps.pod)
	delete(c.podStates, uid)
	c.assumedPods.Delete(uid)
	return nil
}

// AddPod records an assigned pod seen by the informer, confirming an assumed one.
func (c *Cache) AddPod(pod *v1.Pod) {
	uid := framework.PodUID(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[uid]
	switch {
	case ok && c.assumedPods.Has(uid):
		// Confirmed: replace the assumed copy (the node may differ if someone else bound it).
		c.removePodLocked(ps.pod)
		c.addPodLocked(pod)
		c.assumedPods.Delete(uid)
		ps.pod = pod
	case ok:
		c.removePodLocked(ps.pod)
		c.addPodLocked(pod)
		ps.pod = pod
	default:
		c.addPodLocked(pod)
		c.podStates[uid] = &podState{pod: pod}
	}
}

// UpdatePod replaces an assigned pod's accounting.
func (c *Cache) UpdatePod(oldPod, newPod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uid := framework.PodUID(newPod)
	ps, ok := c.podStates[uid]
	if !ok {
		c.addPodLocked(newPod)
		c.podStates[uid] = &podState{pod: newPod}
		return
	}
	c.removePodLocked(ps.pod)
	c.addPodLocked(newPod)
	ps.pod = newPod
	c.assumedPods.Delete(uid)
}

// RemovePod forgets a deleted (or terminated) pod.
func (c *Cache) RemovePod(pod *v1.Pod) {
	uid := framework.PodUID(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[uid]
	if !ok {
		return
	}
	c.removePodLocked(ps.pod)
	delete(c.podStates, uid)
	c.assumedPods.Delete(uid)
}

// IsAssumedPod reports whether pod is assumed and not yet confirmed.
func (c *Cache) IsAssumedPod(pod *v1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.assumedPods.Has(framework.PodUID(pod))
}

// GetPod returns the cached version of pod.
func (c *Cache) GetPod(pod *v1.Pod) (*v1.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.podStates[framework.PodUID(pod)]
	if !ok {
		return nil, false
	}
	return ps.pod, true
}

// AddNode records a node.
func (c *Cache) AddNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni := c.nodeInfo(node.Name)
	if old := ni.Node(); old != nil {
		c.removeNodeImages(old)
	}
	c.addNodeImages(node)
	ni.SetNode(node)
	c.touch(node.Name, ni)
}

// UpdateNode replaces a node.
func (c *Cache) UpdateNode(_, newNode *v1.Node) { c.AddNode(newNode) }

// RemoveNode forgets a node; its pods stay until their own deletions arrive.
func (c *Cache) RemoveNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[node.Name]
	if !ok {
		return
	}
	if old := ni.Node(); old != nil {
		c.removeNodeImages(old)
	}
	ni.RemoveNode()
	c.touch(node.Name, ni)
	if len(ni.Pods) == 0 {
		delete(c.nodes, node.Name)
	}
}

func (c *Cache) addNodeImages(node *v1.Node) {
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			st, ok := c.imageStates[name]
			if !ok {
				st = &imageState{size: img.SizeBytes, nodes: sets.New[string]()}
				c.imageStates[name] = st
			}
			st.nodes.Insert(node.Name)
		}
	}
}

func (c *Cache) removeNodeImages(node *v1.Node) {
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			if st, ok := c.imageStates[name]; ok {
				st.nodes.Delete(node.Name)
				if st.nodes.Len() == 0 {
					delete(c.imageStates, name)
				}
			}
		}
	}
}

// NodeCount returns the number of nodes with a node object.
func (c *Cache) NodeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, ni := range c.nodes {
		if ni.Node() != nil {
			n++
		}
	}
	return n
}

// PodCount returns the number of cached pods, assumed ones included.
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.podStates)
}

// UpdateSnapshot brings snap up to date, cloning only the nodes changed since the last call.
func (c *Cache) UpdateSnapshot(snap *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.dirty) == 0 {
		return
	}
	membershipChanged, rebuild, affinityChanged := false, false, false
	for name := range c.dirty {
		ni, ok := c.nodes[name]
		old, had := snap.nodeInfoMap[name]
		if !ok || ni.Node() == nil {
			if had {
				snap.affinity.Update(old, nil)
				snap.spread.Update(old, nil)
				delete(snap.nodeInfoMap, name)
				membershipChanged = true
			}
			continue
		}
		clone := ni.Clone()
		clone.ImageStates = c.imageSummaries(ni.Node())
		snap.affinity.Update(old, clone)
		snap.spread.Update(old, clone)
		if !had {
			membershipChanged = true
		}
		if membershipChanged || rebuild {
			rebuild = true
		} else if ok, affinity := snap.replace(clone); !ok {
			rebuild = true
		} else if affinity {
			affinityChanged = true
		}
		snap.nodeInfoMap[name] = clone
	}
	c.dirty = map[string]struct{}{}
	if membershipChanged {
		snap.names = snap.names[:0]
		for name := range snap.nodeInfoMap {
			snap.names = append(snap.names, name)
		}
		sort.Strings(snap.names)
	}
	if membershipChanged || rebuild {
		snap.rebuildLists()
	} else if affinityChanged {
		snap.rebuildAffinityLists()
	}
	snap.affinity.Finish(snap.list)
	snap.spread.Finish()
	snap.generation = c.generation
}

// imageSummaries is nil for a node without images, so scoring skips the lookups (a
// nil map costs no memory access; an empty one still does, for every node and pod).
func (c *Cache) imageSummaries(node *v1.Node) map[string]*framework.ImageStateSummary {
	if len(node.Status.Images) == 0 {
		return nil
	}
	out := make(map[string]*framework.ImageStateSummary, len(node.Status.Images))
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			if st, ok := c.imageStates[name]; ok {
				out[name] = &framework.ImageStateSummary{Size: st.size, NumNodes: st.nodes.Len()}
			}
		}
	}
	return out
}

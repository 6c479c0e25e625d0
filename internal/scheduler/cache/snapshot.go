package cache

import (
	"fmt"

	"mizzen/internal/scheduler/affinityindex"
	"mizzen/internal/scheduler/framework"
	"mizzen/internal/scheduler/spreadindex"
)

// Snapshot is an immutable-for-one-cycle view of the cluster that plugins read.
type Snapshot struct {
	nodeInfoMap                   map[string]*framework.NodeInfo
	names                         []string
	list                          []*framework.NodeInfo
	havePodsWithAffinity          []*framework.NodeInfo
	havePodsWithRequiredAntiAffin []*framework.NodeInfo
	// affinityListsStale: the two lists above must be rebuilt before they are read.
	affinityListsStale bool
	// index maps a node name to its position in list, for in-place updates.
	index      map[string]int
	generation int64
	// affinity counts pods per topology domain for InterPodAffinity, kept up to date
	// by UpdateSnapshot from the nodes it replaces.
	affinity *affinityindex.Index
	// spread counts pods per topology domain for PodTopologySpread, kept the same way.
	spread *spreadindex.Index
}

// NewEmptySnapshot returns a snapshot to be filled by Cache.UpdateSnapshot.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{nodeInfoMap: map[string]*framework.NodeInfo{}, affinity: affinityindex.New(), spread: spreadindex.New()}
}

// NewSnapshot builds a snapshot directly from node infos (for tests and simulations).
func NewSnapshot(nodeInfos ...*framework.NodeInfo) *Snapshot {
	s := NewEmptySnapshot()
	for _, ni := range nodeInfos {
		s.nodeInfoMap[ni.Node().Name] = ni
		s.names = append(s.names, ni.Node().Name)
	}
	s.rebuildLists()
	s.affinity = affinityindex.Build(s.list)
	for _, ni := range s.list {
		s.spread.Update(nil, ni)
	}
	return s
}

func (s *Snapshot) rebuildLists() {
	s.index = make(map[string]int, len(s.names))
	s.list = s.list[:0]
	for _, name := range s.names {
		s.index[name] = len(s.list)
		s.list = append(s.list, s.nodeInfoMap[name])
	}
	s.rebuildAffinityLists()
}

// rebuildAffinityLists marks the lists of nodes hosting pods with (anti-)affinity for
// recomputing when next read: with InterPodAffinity reading the affinity index, most
// cycles read neither, and recomputing them walked every node each time a pod with
// (anti-)affinity was placed.
func (s *Snapshot) rebuildAffinityLists() { s.affinityListsStale = true }

// affinityLists recomputes the lists from list, keeping list's order, if stale.
func (s *Snapshot) affinityLists() {
	if !s.affinityListsStale {
		return
	}
	s.affinityListsStale = false
	s.havePodsWithAffinity = s.havePodsWithAffinity[:0]
	s.havePodsWithRequiredAntiAffin = s.havePodsWithRequiredAntiAffin[:0]
	for _, ni := range s.list {
		if len(ni.PodsWithAffinity) > 0 {
			s.havePodsWithAffinity = append(s.havePodsWithAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.havePodsWithRequiredAntiAffin = append(s.havePodsWithRequiredAntiAffin, ni)
		}
	}
}

// replace swaps in a new version of a listed node. It reports ok=false when the node is
// not listed (the lists must be rebuilt), and affinityChanged when the node hosts, or
// hosted, pods with (anti-)affinity, so the affinity lists must be recomputed (they
// hold the old version). Only those lists are: rebuilding the index of thousands of
// nodes on every bind of such a pod was most of the snapshot's cost.
func (s *Snapshot) replace(ni *framework.NodeInfo) (ok, affinityChanged bool) {
	name := ni.Node().Name
	old := s.nodeInfoMap[name]
	i, listed := s.index[name]
	if !listed || old == nil {
		return false, false
	}
	s.nodeInfoMap[name] = ni
	s.list[i] = ni
	return true, len(old.PodsWithAffinity)+len(ni.PodsWithAffinity)+len(old.PodsWithRequiredAntiAffinity)+len(ni.PodsWithRequiredAntiAffinity) > 0
}

// NodeInfos implements framework.SharedLister.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// List returns all nodes, ordered by name.
func (s *Snapshot) List() []*framework.NodeInfo { return s.list }

// HavePodsWithAffinityList returns nodes hosting pods with inter-pod affinity terms.
// Like HavePodsWithRequiredAntiAffinityList it may recompute the list: call it from the
// cycle's sequential phases (PreFilter, PreScore), not from parallel Filter or Score.
func (s *Snapshot) HavePodsWithAffinityList() []*framework.NodeInfo {
	s.affinityLists()
	return s.havePodsWithAffinity
}

// HavePodsWithRequiredAntiAffinityList returns nodes hosting pods with required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() []*framework.NodeInfo {
	s.affinityLists()
	return s.havePodsWithRequiredAntiAffin
}

// AffinityIndex returns the counts InterPodAffinity reads, consistent with the nodes
// listed; read only, and only until the next UpdateSnapshot.
func (s *Snapshot) AffinityIndex() *affinityindex.Index { return s.affinity }

// SpreadIndex returns the counts PodTopologySpread reads, consistent with the nodes
// listed; its Lookup may add an entry, so call it from sequential phases only.
func (s *Snapshot) SpreadIndex() *spreadindex.Index { return s.spread }

// Get returns one node.
func (s *Snapshot) Get(name string) (*framework.NodeInfo, error) {
	ni, ok := s.nodeInfoMap[name]
	if !ok || ni.Node() == nil {
		return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
	}
	return ni, nil
}

// NumNodes returns the number of nodes.
func (s *Snapshot) NumNodes() int { return len(s.list) }

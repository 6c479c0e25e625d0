package framework

import (
	"context"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// MaxNodeScore and MinNodeScore bound normalized scores, as upstream.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
	// MaxTotalScore bounds the sum of weighted scores.
	MaxTotalScore int64 = 1<<63 - 1
)

// StateData is anything a plugin stores in CycleState. Clone must deep-copy data that
// preemption may mutate when simulating.
type StateData interface {
	Clone() StateData
}

// StateKey names an entry in CycleState.
type StateKey string

// CycleState carries data between one pod's extension points in one scheduling cycle.
type CycleState struct {
	// storage is a plain map, read without locking by the parallel Filter and Score
	// workers: plugins write only in the sequential phases (PreFilter, PreScore,
	// Reserve), and a parallel simulation writes only to its own Clone. A sync.Map
	// here cost 2-3% of the whole control plane's CPU in bench/scheduler.
	storage map[StateKey]StateData
	// SkipFilterPlugins and SkipScorePlugins list plugins whose PreFilter/PreScore
	// returned Skip, so the framework does not call them later in the cycle.
	SkipFilterPlugins map[string]bool
	SkipScorePlugins  map[string]bool
	// filters are the Filter plugins of filtersFor not skipped, computed when
	// len(SkipFilterPlugins) was filtersSkipped (see Framework.activeFilterPlugins).
	filters        []FilterPlugin
	filtersFor     *Framework
	filtersSkipped int
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{storage: map[StateKey]StateData{}, SkipFilterPlugins: map[string]bool{}, SkipScorePlugins: map[string]bool{}}
}

// Read returns the value at key; safe from parallel workers.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	d, ok := c.storage[key]
	return d, ok
}

// Write stores a value at key. Call it only from a sequential phase (PreFilter,
// PreScore, Reserve, ...) or on a Clone private to the calling goroutine.
func (c *CycleState) Write(key StateKey, val StateData) {
	c.storage[key] = val
}

// podInfoKey holds the PodInfo of the pod being scheduled (see SetPodInfo).
const podInfoKey StateKey = "framework/PodInfo"

type podInfoState struct{ *PodInfo }

// Clone shares the PodInfo: it is never changed once built.
func (p podInfoState) Clone() StateData { return p }

// SetPodInfo records the PodInfo of the pod this cycle schedules, so plugins reach its
// requests and affinity terms through PodInfoFor instead of computing them again (they
// did, five times per pod).
func (c *CycleState) SetPodInfo(pi *PodInfo) { c.Write(podInfoKey, podInfoState{pi}) }

// PodInfoFor returns the cycle's PodInfo when it was built for pod (the same object),
// else a new one.
func PodInfoFor(state *CycleState, pod *v1.Pod) *PodInfo {
	if state != nil {
		if d, ok := state.Read(podInfoKey); ok {
			if pi := d.(podInfoState).PodInfo; pi.Pod == pod {
				return pi
			}
		}
	}
	return NewPodInfo(pod)
}

// Clone deep-copies the state for a preemption simulation.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	// Preemption clones a state for every node it tries: maps made at their size.
	out := &CycleState{storage: make(map[StateKey]StateData, len(c.storage)),
		SkipFilterPlugins: maps.Clone(c.SkipFilterPlugins), SkipScorePlugins: maps.Clone(c.SkipScorePlugins)}
	for k, v := range c.storage {
		out.storage[k] = v.Clone()
	}
	out.filters, out.filtersFor, out.filtersSkipped = c.filters, c.filtersFor, c.filtersSkipped
	return out
}

// Plugin is the parent of all plugins.
type Plugin interface {
	Name() string
}

// PreFilterResult narrows the nodes to evaluate; nil NodeNames means all nodes.
type PreFilterResult struct {
	NodeNames map[string]struct{}
	// Plugins names the plugins whose results were intersected (set by the framework).
	Plugins []string
}

// PreFilterPlugin runs once per pod before filtering.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *v1.Pod) (*PreFilterResult, *Status)
	// PreFilterExtensions returns nil when the plugin's state does not depend on other pods.
	PreFilterExtensions() PreFilterExtensions
}

// PreFilterExtensions let preemption update PreFilter state when it simulates adding or
// removing pods on a node.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status
}

// FilterPlugin rejects nodes that cannot run the pod.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
}

// PostFilterResult carries the node nominated by a PostFilter plugin.
type PostFilterResult struct {
	NominatedNodeName string
	// ClearNomination asks to clear an earlier nomination.
	ClearNomination bool
}

// PostFilterPlugin runs when no node fits, e.g. preemption.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *v1.Pod, nodeToStatus map[string]*Status) (*PostFilterResult, *Status)
}

// PreScorePlugin runs once per pod before scoring with the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status
}

// NodeScore is a node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// ScoreExtensions normalize a plugin's raw scores to [MinNodeScore, MaxNodeScore].
type ScoreExtensions interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *v1.Pod, scores []NodeScore) *Status
}

// ScorePlugin ranks feasible nodes.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions returns nil when scores need no normalization.
	ScoreExtensions() ScoreExtensions
}

// ReservePlugin claims resources for the chosen node; Unreserve undoes it on failure.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}

// PermitPlugin approves, rejects or delays (Wait with a timeout) the binding.
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin prepares the binding, e.g. binds volumes.
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// BindPlugin binds the pod; Skip passes to the next bind plugin.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// EnqueueExtensions declares the cluster events that can make a pod this plugin rejected
// schedulable again.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister() []ClusterEventWithHint
}

// NodeInfoLister reads the snapshot of this cycle.
type NodeInfoLister interface {
	List() []*NodeInfo
	HavePodsWithAffinityList() []*NodeInfo
	HavePodsWithRequiredAntiAffinityList() []*NodeInfo
	Get(nodeName string) (*NodeInfo, error)
}

// SharedLister gives plugins the snapshot.
type SharedLister interface {
	NodeInfos() NodeInfoLister
}

// Parallelizer runs pieces of work on a bounded pool of workers.
type Parallelizer interface {
	Until(ctx context.Context, pieces int, work func(i int))
}

// PodNominator tracks pods nominated to nodes by preemption.
type PodNominator interface {
	NominatedPodsForNode(nodeName string) []*PodInfo
}

// PodActivator is implemented by nominators (the scheduling queue) that can send a
// waiting pod back to the active heap: plugins that finish work for a pod outside
// its scheduling cycle (the async preemption) call it through Handle.Activate.
type PodActivator interface {
	Activate(pod *v1.Pod)
}

// NominationCounter is implemented by nominators that can say cheaply whether any pod
// is nominated at all, so filtering skips the per-node lookup (and the read of each
// node's name, a cache miss per node) when none is.
type NominationCounter interface {
	HasNominatedPods() bool
}

// PluginsRunner lets PostFilter plugins re-run other plugins while simulating.
type PluginsRunner interface {
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
}

// Handle is what plugins may use from the framework that created them.
type Handle interface {
	PodNominator
	PodActivator
	PluginsRunner
	SnapshotSharedLister() SharedLister
	ClientSet() kubernetes.Interface
	SharedInformerFactory() informers.SharedInformerFactory
	EventRecorder() events.EventRecorder
	Parallelizer() Parallelizer
}

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// PluginFactory builds a plugin from its JSON args.
type PluginFactory func(args json.RawMessage, h Handle) (Plugin, error)

// Extension point names, as in KubeSchedulerConfiguration's plugins field.
const (
	PointPreEnqueue = "preEnqueue"
	PointQueueSort  = "queueSort"
	PointPreFilter  = "preFilter"
	PointFilter     = "filter"
	PointPostFilter = "postFilter"
	PointPreScore   = "preScore"
	PointScore      = "score"
	PointReserve    = "reserve"
	PointPermit     = "permit"
	PointPreBind    = "preBind"
	PointBind       = "bind"
	PointPostBind   = "postBind"
)

// ProfileConfig is one resolved scheduling profile. Plugins in MultiPoint are enabled at
// every extension point they implement, after the plugins enabled explicitly at that
// point and unless disabled there ("*" disables all of MultiPoint at that point).
type ProfileConfig struct {
	SchedulerName            string
	PercentageOfNodesToScore *int32
	MultiPoint               []string
	Enabled                  map[string][]string
	Disabled                 map[string][]string
	// ScoreWeights defaults to 1 for score plugins not listed.
	ScoreWeights map[string]int32
	PluginArgs   map[string]json.RawMessage
}

// Options are the shared dependencies of every profile's framework.
type Options struct {
	ClientSet       kubernetes.Interface
	InformerFactory informers.SharedInformerFactory
	EventRecorder   events.EventRecorder
	Snapshot        SharedLister
	Nominator       PodNominator
	Parallelism     int
}

// Framework runs one profile's plugins; it is also the Handle given to those plugins.
type Framework struct {
	opts    Options
	profile ProfileConfig

	plugins           map[string]Plugin
	preFilterPlugins  []PreFilterPlugin
	filterPlugins     []FilterPlugin
	postFilterPlugins []PostFilterPlugin
	preScorePlugins   []PreScorePlugin
	scorePlugins      []ScorePlugin
	scoreWeights      []int64
	reservePlugins    []ReservePlugin
	permitPlugins     []PermitPlugin
	preBindPlugins    []PreBindPlugin
	bindPlugins       []BindPlugin

	waitingMu   sync.Mutex
	waitingPods map[types.UID]*WaitingPod

	// scoreBuffers recycles RunScorePlugins' per-plugin score lists (plugins x nodes
	// entries per pod, the scheduler's largest allocation).
	scoreBuffers sync.Pool
}

var _ Handle = (*Framework)(nil)

// NewFramework instantiates the profile's plugins from the registry.
func NewFramework(registry map[string]PluginFactory, profile ProfileConfig, opts Options) (*Framework, error) {
	if opts.Parallelism <= 0 {
		opts.Parallelism = 16
	}
	f := &Framework{opts: opts, profile: profile, plugins: map[string]Plugin{}, waitingPods: map[types.UID]*WaitingPod{}}
	get := func(name string) (Plugin, error) {
		if p, ok := f.plugins[name]; ok {
			return p, nil
		}
		factory, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("profile %q: plugin %q does not exist", profile.SchedulerName, name)
		}
		p, err := factory(profile.PluginArgs[name], f)
		if err != nil {
			return nil, fmt.Errorf("profile %q: initializing plugin %q: %w", profile.SchedulerName, name, err)
		}
		f.plugins[name] = p
		return p, nil
	}
	adders := map[string]func(Plugin) bool{
		PointPreEnqueue: func(Plugin) bool { return false },
		PointQueueSort:  func(Plugin) bool { return false },
		PointPostBind:   func(Plugin) bool { return false },
		PointPreFilter: func(p Plugin) bool {
			x, ok := p.(PreFilterPlugin)
			f.appendIf(ok, func() { f.preFilterPlugins = append(f.preFilterPlugins, x) })
			return ok
		},
		PointFilter: func(p Plugin) bool {
			x, ok := p.(FilterPlugin)
			f.appendIf(ok, func() { f.filterPlugins = append(f.filterPlugins, x) })
			return ok
		},
		PointPostFilter: func(p Plugin) bool {
			x, ok := p.(PostFilterPlugin)
			f.appendIf(ok, func() { f.postFilterPlugins = append(f.postFilterPlugins, x) })
			return ok
		},
		PointPreScore: func(p Plugin) bool {
			x, ok := p.(PreScorePlugin)
			f.appendIf(ok, func() { f.preScorePlugins = append(f.preScorePlugins, x) })
			return ok
		},
		PointScore: func(p Plugin) bool {
			x, ok := p.(ScorePlugin)
			f.appendIf(ok, func() {
				w := int64(1)
				if v, has := profile.ScoreWeights[p.Name()]; has && v > 0 {
					w = int64(v)
				}
				f.scorePlugins = append(f.scorePlugins, x)
				f.scoreWeights = append(f.scoreWeights, w)
			})
			return ok
		},
		PointReserve: func(p Plugin) bool {
			x, ok := p.(ReservePlugin)
			f.appendIf(ok, func() { f.reservePlugins = append(f.reservePlugins, x) })
			return ok
		},
		PointPermit: func(p Plugin) bool {
			x, ok := p.(PermitPlugin)
			f.appendIf(ok, func() { f.permitPlugins = append(f.permitPlugins, x) })
			return ok
		},
		PointPreBind: func(p Plugin) bool {
			x, ok := p.(PreBindPlugin)
			f.appendIf(ok, func() { f.preBindPlugins = append(f.preBindPlugins, x) })
			return ok
		},
		PointBind: func(p Plugin) bool {
			x, ok := p.(BindPlugin)
			f.appendIf(ok, func() { f.bindPlugins = append(f.bindPlugins, x) })
			return ok
		},
	}
	multi := make([]Plugin, 0, len(profile.MultiPoint))
	for _, name := range profile.MultiPoint {
		p, err := get(name)
		if err != nil {
			return nil, err
		}
		multi = append(multi, p)
	}
	for _, pt := range []string{PointPreEnqueue, PointQueueSort, PointPreFilter, PointFilter, PointPostFilter, PointPreScore, PointScore, PointReserve, PointPermit, PointPreBind, PointBind, PointPostBind} {
		add := adders[pt]
		seen := sets.New[string]()
		for _, name := range profile.Enabled[pt] {
			if seen.Has(name) {
				return nil, fmt.Errorf("profile %q: plugin %q already registered as %q", profile.SchedulerName, name, pt)
			}
			seen.Insert(name)
			p, err := get(name)
			if err != nil {
				return nil, err
			}
			if !add(p) && pt != PointPreEnqueue && pt != PointQueueSort && pt != PointPostBind {
				return nil, fmt.Errorf("profile %q: plugin %q does not extend %s plugin", profile.SchedulerName, name, pt)
			}
		}
		disabled := sets.New(profile.Disabled[pt]...)
		for _, p := range multi {
			if seen.Has(p.Name()) || disabled.Has(p.Name()) || disabled.Has("*") {
				continue
			}
			seen.Insert(p.Name())
			add(p)
		}
	}
	if len(f.bindPlugins) == 0 {
		return nil, fmt.Errorf("profile %q: at least one bind plugin is needed", profile.SchedulerName)
	}
	var total int64
	for _, w := range f.scoreWeights {
		total += w * MaxNodeScore
		if total > math.MaxInt64/2 {
			return nil, fmt.Errorf("profile %q: total score weights overflow", profile.SchedulerName)
		}
	}
	return f, nil
}

func (f *Framework) appendIf(ok bool, do func()) {
	if ok {
		do()
	}
}

// ProfileName returns the schedulerName the profile serves.
func (f *Framework) ProfileName() string { return f.profile.SchedulerName }

// PercentageOfNodesToScore returns the profile override, nil when unset.
func (f *Framework) PercentageOfNodesToScore() *int32 { return f.profile.PercentageOfNodesToScore }

// HasFilterPlugins reports whether any filter is configured.
func (f *Framework) HasFilterPlugins() bool { return len(f.filterPlugins) > 0 }

// HasPostFilterPlugins reports whether any PostFilter (preemption) is configured.
func (f *Framework) HasPostFilterPlugins() bool { return len(f.postFilterPlugins) > 0 }

// HasScorePlugins reports whether any score plugin is configured.
func (f *Framework) HasScorePlugins() bool { return len(f.scorePlugins) > 0 }

// EventsToRegister collects the events of every plugin, keyed by plugin name.
func (f *Framework) EventsToRegister() map[string][]ClusterEventWithHint {
	out := map[string][]ClusterEventWithHint{}
	for name, p := range f.plugins {
		if ext, ok := p.(EnqueueExtensions); ok {
			out[name] = ext.EventsToRegister()
		} else {
			// Plugins that declare nothing may be helped by anything.
			out[name] = []ClusterEventWithHint{{Event: ClusterEvent{Resource: WildCard, ActionType: All}}}
		}
	}
	return out
}

// Handle implementation.

// SnapshotSharedLister implements Handle.
func (f *Framework) SnapshotSharedLister() SharedLister { return f.opts.Snapshot }

// ClientSet implements Handle.
func (f *Framework) ClientSet() kubernetes.Interface { return f.opts.ClientSet }

// SharedInformerFactory implements Handle.
func (f *Framework) SharedInformerFactory() informers.SharedInformerFactory {
	return f.opts.InformerFactory
}

// EventRecorder implements Handle.
func (f *Framework) EventRecorder() events.EventRecorder { return f.opts.EventRecorder }

// Parallelizer implements Handle.
func (f *Framework) Parallelizer() Parallelizer { return parallelizer{workers: f.opts.Parallelism} }

// Activate implements Handle: it sends pod back to the active heap if the
// nominator can (see PodActivator).
func (f *Framework) Activate(pod *v1.Pod) {
	if a, ok := f.opts.Nominator.(PodActivator); ok {
		a.Activate(pod)
	}
}

// NominatedPodsForNode implements Handle.
func (f *Framework) NominatedPodsForNode(nodeName string) []*PodInfo {
	if f.opts.Nominator == nil {
		return nil
	}
	return f.opts.Nominator.NominatedPodsForNode(nodeName)
}

type parallelizer struct{ workers int }

// Until runs work(0..pieces-1) on at most p.workers goroutines, in chunks of about
// sqrt(pieces) so small work items do not pay per-item synchronization, and stops
// starting pieces once ctx is done.
//
// It runs no more goroutines than GOMAXPROCS, the caller's among them: more cannot
// run at once, and each costs a start and a wake-up per call (a pod's filters and
// scores are two calls). Fewer goroutines also mean a shorter wait at the end on a
// busy machine, where every goroutine's thread may have been preempted.
func (p parallelizer) Until(ctx context.Context, pieces int, work func(i int)) {
	if pieces <= 0 {
		return
	}
	chunk := max(int(math.Sqrt(float64(pieces))), 1)
	chunks := (pieces + chunk - 1) / chunk
	workers := min(p.workers, runtime.GOMAXPROCS(0), chunks)
	done := ctx.Done()
	var next atomic.Int64
	run := func() {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			for i := c * chunk; i < min((c+1)*chunk, pieces); i++ {
				select {
				case <-done:
					return
				default:
				}
				work(i)
			}
		}
	}
	if workers <= 1 {
		run()
		return
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}

// RunPreFilterPlugins runs PreFilter plugins, marking plugins that asked to be skipped.
// The returned set names the plugins that rejected the pod.
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod) (*PreFilterResult, *Status, sets.Set[string]) {
	var result *PreFilterResult
	rejectors := sets.New[string]()
	for _, pl := range f.preFilterPlugins {
		r, s := pl.PreFilter(ctx, state, pod)
		if s.IsSkip() {
			state.SkipFilterPlugins[pl.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			s.WithPlugin(pl.Name())
			if s.IsRejected() {
				rejectors.Insert(pl.Name())
			}
			return nil, s, rejectors
		}
		if r != nil && r.NodeNames != nil {
			if result == nil {
				result = &PreFilterResult{NodeNames: r.NodeNames, Plugins: []string{pl.Name()}}
			} else {
				result.Plugins = append(result.Plugins, pl.Name())
				merged := map[string]struct{}{}
				for n := range result.NodeNames {
					if _, ok := r.NodeNames[n]; ok {
						merged[n] = struct{}{}
					}
				}
				result.NodeNames = merged
			}
			if len(result.NodeNames) == 0 {
				rejectors.Insert(pl.Name())
				return nil, NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("node(s) didn't satisfy plugin(s) %v simultaneously", result.Plugins)).WithPlugin(pl.Name()), rejectors
			}
		}
	}
	state.filters, state.filtersFor, state.filtersSkipped = f.computeActiveFilterPlugins(state), f, len(state.SkipFilterPlugins)
	return result, nil, rejectors
}

// RunPreFilterExtensionAddPod implements PluginsRunner.
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status {
	for _, pl := range f.preFilterPlugins {
		if state.SkipFilterPlugins[pl.Name()] {
			continue
		}
		if ext := pl.PreFilterExtensions(); ext != nil {
			if s := ext.AddPod(ctx, state, podToSchedule, podToAdd, nodeInfo); !s.IsSuccess() {
				return s.WithPlugin(pl.Name())
			}
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod implements PluginsRunner.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status {
	for _, pl := range f.preFilterPlugins {
		if state.SkipFilterPlugins[pl.Name()] {
			continue
		}
		if ext := pl.PreFilterExtensions(); ext != nil {
			if s := ext.RemovePod(ctx, state, podToSchedule, podToRemove, nodeInfo); !s.IsSuccess() {
				return s.WithPlugin(pl.Name())
			}
		}
	}
	return nil
}

// RunFilterPlugins runs the filters on one node and returns the first rejection.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status {
	for _, pl := range f.activeFilterPlugins(state) {
		if s := pl.Filter(ctx, state, pod, nodeInfo); !s.IsSuccess() {
			if !s.IsRejected() {
				s = AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), s.AsError()))
			}
			return s.WithPlugin(pl.Name())
		}
	}
	return nil
}

// activeFilterPlugins returns the filters PreFilter did not skip: the list that
// RunPreFilterPlugins left in state, or, when the skips changed since (or PreFilter did
// not run), one computed now. The list saves a map lookup per node and plugin.
func (f *Framework) activeFilterPlugins(state *CycleState) []FilterPlugin {
	if state.filtersFor == f && state.filtersSkipped == len(state.SkipFilterPlugins) {
		return state.filters
	}
	return f.computeActiveFilterPlugins(state)
}

func (f *Framework) computeActiveFilterPlugins(state *CycleState) []FilterPlugin {
	if len(state.SkipFilterPlugins) == 0 {
		return f.filterPlugins
	}
	active := make([]FilterPlugin, 0, len(f.filterPlugins))
	for _, pl := range f.filterPlugins {
		if !state.SkipFilterPlugins[pl.Name()] {
			active = append(active, pl)
		}
	}
	return active
}

// RunFilterPluginsWithNominatedPods filters a node as if pods nominated to it with equal
// or higher priority were already there, and also without them (they may not land), so
// the pod fits only if it fits both ways, as upstream.
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status {
	if c, ok := f.opts.Nominator.(NominationCounter); ok && !c.HasNominatedPods() {
		return f.RunFilterPlugins(ctx, state, pod, nodeInfo)
	}
	nominated := f.NominatedPodsForNode(nodeInfo.Name())
	if len(nominated) > 0 {
		prio := PodPriority(pod)
		var withNominated *NodeInfo
		var stateCopy *CycleState
		for _, pi := range nominated {
			if pi.Priority < prio || pi.UID == PodUID(pod) {
				continue
			}
			if withNominated == nil {
				withNominated = nodeInfo.Clone()
				stateCopy = state.Clone()
			}
			withNominated.AddPodInfo(pi)
			if s := f.RunPreFilterExtensionAddPod(ctx, stateCopy, pod, pi, withNominated); !s.IsSuccess() {
				return s
			}
		}
		if withNominated != nil {
			if s := f.RunFilterPlugins(ctx, stateCopy, pod, withNominated); !s.IsSuccess() {
				return s
			}
		}
	}
	return f.RunFilterPlugins(ctx, state, pod, nodeInfo)
}

// RunPostFilterPlugins runs PostFilter plugins until one succeeds.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeToStatus map[string]*Status) (*PostFilterResult, *Status) {
	var reasons []string
	var result *PostFilterResult
	for _, pl := range f.postFilterPlugins {
		r, s := pl.PostFilter(ctx, state, pod, nodeToStatus)
		if s.IsSuccess() {
			return r, s
		}
		if !s.IsRejected() {
			return r, s.WithPlugin(pl.Name())
		}
		if r != nil {
			result = r
		}
		reasons = append(reasons, s.Reasons()...)
	}
	return result, NewStatus(Unschedulable, reasons...)
}

// RunPreScorePlugins runs PreScore, marking skipped plugins.
func (f *Framework) RunPreScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status {
	for _, pl := range f.preScorePlugins {
		s := pl.PreScore(ctx, state, pod, nodes)
		if s.IsSkip() {
			state.SkipScorePlugins[pl.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			return AsStatus(fmt.Errorf("running PreScore plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunScorePlugins scores nodes with every plugin in parallel, normalizes, weights and
// sums; it returns the total per node, in the order of nodes.
func (f *Framework) RunScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) ([]int64, *Status) {
	active := make([]int, 0, len(f.scorePlugins))
	for i, pl := range f.scorePlugins {
		if !state.SkipScorePlugins[pl.Name()] {
			active = append(active, i)
		}
	}
	totals := make([]int64, len(nodes))
	if len(active) == 0 {
		return totals, nil
	}
	buf, _ := f.scoreBuffers.Get().(*[]NodeScore)
	if buf == nil {
		buf = new([]NodeScore)
	}
	if need := len(active) * len(nodes); cap(*buf) < need {
		*buf = make([]NodeScore, need)
	}
	defer f.scoreBuffers.Put(buf)
	scores := make([][]NodeScore, len(active))
	for j := range active {
		// Every entry is written below before it is read.
		scores[j] = (*buf)[j*len(nodes) : (j+1)*len(nodes) : (j+1)*len(nodes)]
	}
	var errMu sync.Mutex
	var firstErr *Status
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.Parallelizer().Until(ctx, len(nodes), func(n int) {
		for j, i := range active {
			s, st := f.scorePlugins[i].Score(ctx, state, pod, nodes[n])
			if !st.IsSuccess() {
				errMu.Lock()
				if firstErr == nil {
					firstErr = AsStatus(fmt.Errorf("running Score plugin %q: %w", f.scorePlugins[i].Name(), st.AsError()))
				}
				errMu.Unlock()
				cancel()
				return
			}
			scores[j][n] = NodeScore{Name: nodes[n].Name(), Score: s}
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for j, i := range active {
		pl := f.scorePlugins[i]
		if ext := pl.ScoreExtensions(); ext != nil {
			if st := ext.NormalizeScore(ctx, state, pod, scores[j]); !st.IsSuccess() {
				return nil, AsStatus(fmt.Errorf("running Normalize on Score plugin %q: %w", pl.Name(), st.AsError()))
			}
		}
		for n := range nodes {
			s := scores[j][n].Score
			if s > MaxNodeScore || s < MinNodeScore {
				return nil, AsStatus(fmt.Errorf("plugin %q returns an invalid score %d, it should in the range of [%d, %d] after normalizing", pl.Name(), s, MinNodeScore, MaxNodeScore))
			}
			totals[n] += s * f.scoreWeights[i]
		}
	}
	return totals, nil
}

// RunReservePluginsReserve reserves in order; on failure the caller runs Unreserve.
func (f *Framework) RunReservePluginsReserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status {
	for _, pl := range f.reservePlugins {
		if s := pl.Reserve(ctx, state, pod, nodeName); !s.IsSuccess() {
			return s.WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunReservePluginsUnreserve undoes reservations in reverse order.
func (f *Framework) RunReservePluginsUnreserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) {
	for i := len(f.reservePlugins) - 1; i >= 0; i-- {
		f.reservePlugins[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// WaitingPod is a pod held by Permit plugins returning Wait.
type WaitingPod struct {
	pod     *v1.Pod
	mu      sync.Mutex
	pending map[string]*time.Timer
	done    chan *Status
}

// Pod returns the waiting pod.
func (w *WaitingPod) Pod() *v1.Pod { return w.pod }

// Allow lets the pod through for one plugin; once all allowed, binding proceeds.
func (w *WaitingPod) Allow(plugin string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.pending[plugin]; ok {
		t.Stop()
		delete(w.pending, plugin)
	}
	if len(w.pending) == 0 {
		select {
		case w.done <- nil:
		default:
		}
	}
}

// Reject fails the pod's permit.
func (w *WaitingPod) Reject(plugin, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.pending {
		t.Stop()
	}
	select {
	case w.done <- NewStatus(Unschedulable, msg).WithPlugin(plugin):
	default:
	}
}

// GetWaitingPod returns the waiting pod with uid, or nil.
func (f *Framework) GetWaitingPod(uid types.UID) *WaitingPod {
	f.waitingMu.Lock()
	defer f.waitingMu.Unlock()
	return f.waitingPods[uid]
}

// RunPermitPlugins asks Permit plugins; Wait statuses register a waiting pod that
// WaitOnPermit later blocks on.
func (f *Framework) RunPermitPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status {
	waits := map[string]time.Duration{}
	for _, pl := range f.permitPlugins {
		s, timeout := pl.Permit(ctx, state, pod, nodeName)
		if s.Code() == Wait {
			if timeout > 15*time.Minute {
				timeout = 15 * time.Minute
			}
			waits[pl.Name()] = timeout
			continue
		}
		if !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(pl.Name())
			}
			return AsStatus(fmt.Errorf("running Permit plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	if len(waits) == 0 {
		return nil
	}
	w := &WaitingPod{pod: pod, pending: map[string]*time.Timer{}, done: make(chan *Status, 1)}
	for name, timeout := range waits {
		name := name
		w.pending[name] = time.AfterFunc(timeout, func() {
			w.Reject(name, fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", timeout, name))
		})
	}
	f.waitingMu.Lock()
	f.waitingPods[PodUID(pod)] = w
	f.waitingMu.Unlock()
	return NewStatus(Wait)
}

// WaitOnPermit blocks until a waiting pod is allowed or rejected.
func (f *Framework) WaitOnPermit(ctx context.Context, pod *v1.Pod) *Status {
	f.waitingMu.Lock()
	w := f.waitingPods[PodUID(pod)]
	f.waitingMu.Unlock()
	if w == nil {
		return nil
	}
	defer func() {
		f.waitingMu.Lock()
		delete(f.waitingPods, PodUID(pod))
		f.waitingMu.Unlock()
	}()
	select {
	case s := <-w.done:
		return s
	case <-ctx.Done():
		return AsStatus(ctx.Err())
	}
}

// RunPreBindPlugins runs PreBind in order.
func (f *Framework) RunPreBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status {
	for _, pl := range f.preBindPlugins {
		if s := pl.PreBind(ctx, state, pod, nodeName); !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(pl.Name())
			}
			return AsStatus(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunBindPlugins runs bind plugins until one does not Skip.
func (f *Framework) RunBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status {
	for _, pl := range f.bindPlugins {
		s := pl.Bind(ctx, state, pod, nodeName)
		if s.IsSkip() {
			continue
		}
		if !s.IsSuccess() {
			return s.WithPlugin(pl.Name())
		}
		return nil
	}
	return NewStatus(Skip)
}

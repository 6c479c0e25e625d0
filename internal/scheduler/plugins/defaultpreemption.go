package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	policylisters "k8s.io/client-go/listers/policy/v1"

	"mizzen/internal/scheduler/framework"
)

// Preemption messages, as upstream.
const (
	msgNoVictims        = "No preemption victims found for incoming pod"
	msgNotHelpful       = "Preemption is not helpful for scheduling"
	msgPolicyNever      = "not eligible due to preemptionPolicy=Never."
	msgTerminatingOnNom = "not eligible due to a terminating pod on the nominated node."
	msgRunning          = "the pod's preemption of victims on its nominated node is still running."
)

// DefaultPreemptionArgs is the plugin's configuration.
type DefaultPreemptionArgs struct {
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32 `json:"minCandidateNodesAbsolute,omitempty"`
}

// DefaultPreemption, when no node fits, finds a node where evicting lower-priority pods
// makes room (fewest PDB violations, then lowest victim priorities, then fewest victims),
// deletes those victims, and nominates the node for the pod.
//
// The victims' API calls run after the cycle, as upstream's async preemption
// (SchedulerAsyncPreemption, on by default): the scheduling loop goes on with the
// next pod while they are made. Until they end the preemptor is not preempted for
// again (its victims are still in the cache, so a second dry run would pick more),
// and when they end it is sent back to the active heap. Its next attempt may come
// before the cache has seen the deletions; until it has, the preemptor waits rather
// than evict more pods for the room its victims are about to free.
type DefaultPreemption struct {
	handle     framework.Handle
	pdbs       policylisters.PodDisruptionBudgetLister
	percentage int32
	absolute   int32

	mu        sync.Mutex
	running   map[types.UID]bool                // preemptors whose victims' API calls are in flight
	preempted map[types.UID]*finishedPreemption // preemptors whose victims were deleted
}

// finishedPreemption is a preemption whose victims' deletions succeeded, kept until
// the scheduler's cache shows them terminating or gone.
type finishedPreemption struct {
	node    string
	victims map[types.UID]bool
	at      time.Time
}

// preemptedTTL bounds how long a finished preemption is remembered: its preemptor has
// long been bound, deleted or preempted again by then.
const preemptedTTL = 2 * time.Minute

var _ framework.PostFilterPlugin = (*DefaultPreemption)(nil)

// NewDefaultPreemption is the plugin factory.
func NewDefaultPreemption(raw json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	var args DefaultPreemptionArgs
	if err := decodeArgs(raw, DefaultPreemptionName, &args); err != nil {
		return nil, err
	}
	pl := &DefaultPreemption{handle: h, percentage: 10, absolute: 100, running: map[types.UID]bool{},
		preempted: map[types.UID]*finishedPreemption{}}
	if args.MinCandidateNodesPercentage != nil {
		pl.percentage = *args.MinCandidateNodesPercentage
	}
	if args.MinCandidateNodesAbsolute != nil {
		pl.absolute = *args.MinCandidateNodesAbsolute
	}
	if pl.percentage < 0 || pl.percentage > 100 {
		return nil, fmt.Errorf("DefaultPreemptionArgs: minCandidateNodesPercentage: Invalid value: %d: not in valid range [0, 100]", pl.percentage)
	}
	if pl.absolute < 0 || (pl.percentage == 0 && pl.absolute == 0) {
		return nil, fmt.Errorf("DefaultPreemptionArgs: minCandidateNodesAbsolute: Invalid value: %d: cannot be zero at the same time as minCandidateNodesPercentage", pl.absolute)
	}
	if h != nil && h.SharedInformerFactory() != nil {
		pl.pdbs = h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*DefaultPreemption) Name() string { return DefaultPreemptionName }

// candidate is a node with the victims to evict there.
type candidate struct {
	node          string
	victims       []*v1.Pod
	pdbViolations int
}

// PostFilter implements framework.PostFilterPlugin.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeToStatus map[string]*framework.Status) (*framework.PostFilterResult, *framework.Status) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return nil, framework.NewStatus(framework.Unschedulable, "preemption: "+msgPolicyNever)
	}
	if pl.isRunning(pod.UID) {
		return nil, framework.NewStatus(framework.Unschedulable, "preemption: "+msgRunning)
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	if pl.victimsNotYetSeenGoing(pod.UID, lister) {
		return nil, framework.NewStatus(framework.Unschedulable, "preemption: "+msgTerminatingOnNom)
	}
	if nom := pod.Status.NominatedNodeName; nom != "" {
		// Victims on the nominated node are still terminating: wait for them.
		if st, ok := nodeToStatus[nom]; !ok || st.Code() != framework.UnschedulableAndUnresolvable {
			if ni, err := lister.Get(nom); err == nil {
				prio := framework.PodPriority(pod)
				for _, p := range ni.Pods {
					if p.Pod.DeletionTimestamp != nil && p.Priority < prio {
						return nil, framework.NewStatus(framework.Unschedulable, "preemption: "+msgTerminatingOnNom)
					}
				}
			}
		}
	}

	all := lister.List()
	statuses := make(map[string]*framework.Status, len(all))
	var potential []*framework.NodeInfo
	for _, ni := range all {
		st, ok := nodeToStatus[ni.Node().Name]
		if ok && st.Code() == framework.UnschedulableAndUnresolvable {
			statuses[ni.Node().Name] = framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNotHelpful)
			continue
		}
		potential = append(potential, ni)
	}
	var pdbs []*policyv1.PodDisruptionBudget
	if pl.pdbs != nil {
		pdbs, _ = pl.pdbs.List(labels.Everything())
	}

	candidates := make([]*candidate, len(potential))
	var mu sync.Mutex
	// Stop the dry run once enough candidates are found, as upstream samples.
	want := int32(pl.numCandidates(len(potential)))
	var foundCount atomic.Int32
	dryCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	pl.handle.Parallelizer().Until(dryCtx, len(potential), func(i int) {
		c, st := pl.selectVictimsOnNode(ctx, state.Clone(), pod, potential[i].Clone(), pdbs)
		if c != nil {
			candidates[i] = c
			if foundCount.Add(1) >= want {
				cancel()
			}
			return
		}
		mu.Lock()
		statuses[potential[i].Node().Name] = st
		mu.Unlock()
	})
	var found []*candidate
	for _, c := range candidates {
		if c != nil {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		fitErr := &framework.FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: framework.Diagnosis{NodeToStatus: statuses}}
		return &framework.PostFilterResult{ClearNomination: true}, framework.NewStatus(framework.Unschedulable, "preemption: "+fitErr.Error())
	}
	best := pickCandidate(found)
	pl.setRunning(pod.UID, true)
	go func() {
		defer pl.handle.Activate(pod)
		defer pl.setRunning(pod.UID, false)
		if err := pl.prepare(ctx, best, pod); err != nil {
			// The nomination stays; the next attempt finds the victims left and
			// preempts again.
			slog.ErrorContext(ctx, "preemption", "pod", framework.PodKey(pod), "node", best.node, "err", err)
			return
		}
		pl.finished(pod.UID, best)
	}()
	return &framework.PostFilterResult{NominatedNodeName: best.node}, nil
}

// finished remembers that the preemptor's victims were deleted, and forgets
// preemptions older than preemptedTTL.
func (pl *DefaultPreemption) finished(preemptor types.UID, c *candidate) {
	victims := make(map[types.UID]bool, len(c.victims))
	for _, v := range c.victims {
		victims[v.UID] = true
	}
	now := time.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for uid, f := range pl.preempted {
		if now.Sub(f.at) > preemptedTTL {
			delete(pl.preempted, uid)
		}
	}
	pl.preempted[preemptor] = &finishedPreemption{node: c.node, victims: victims, at: now}
}

// victimsNotYetSeenGoing says whether a victim the preemptor's last preemption deleted
// is still in this cycle's snapshot without a deletion timestamp: the cache has not
// caught up with the deletion, and a dry run now would pick more victims for room
// that is already being freed. Once the cache has caught up the preemption is
// forgotten (victims still terminating are waited for by the nominated-node check).
func (pl *DefaultPreemption) victimsNotYetSeenGoing(preemptor types.UID, lister framework.NodeInfoLister) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	f := pl.preempted[preemptor]
	if f == nil {
		return false
	}
	if ni, err := lister.Get(f.node); err == nil {
		for _, p := range ni.Pods {
			if f.victims[p.Pod.UID] && p.Pod.DeletionTimestamp == nil {
				return true
			}
		}
	}
	delete(pl.preempted, preemptor)
	return false
}

func (pl *DefaultPreemption) isRunning(uid types.UID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.running[uid]
}

func (pl *DefaultPreemption) setRunning(uid types.UID, on bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if on {
		pl.running[uid] = true
	} else {
		delete(pl.running, uid)
	}
}

// numCandidates is max(nodes*percentage/100, absolute), capped at the node count.
func (pl *DefaultPreemption) numCandidates(nodes int) int {
	n := nodes * int(pl.percentage) / 100
	if n < int(pl.absolute) {
		n = int(pl.absolute)
	}
	if n > nodes {
		n = nodes
	}
	return n
}

// selectVictimsOnNode removes all lower-priority pods, checks the pod fits, then adds
// back as many as possible (PDB-protected ones first, then by priority).
func (pl *DefaultPreemption) selectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo, pdbs []*policyv1.PodDisruptionBudget) (*candidate, *framework.Status) {
	prio := framework.PodPriority(pod)
	var potential []*framework.PodInfo
	for _, p := range append([]*framework.PodInfo(nil), ni.Pods...) {
		if p.Priority < prio {
			potential = append(potential, p)
			ni.RemovePod(p.Pod)
			if st := pl.handle.RunPreFilterExtensionRemovePod(ctx, state, pod, p, ni); !st.IsSuccess() {
				return nil, st
			}
		}
	}
	if len(potential) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	if st := pl.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); !st.IsSuccess() {
		return nil, st
	}
	// Most important first, so they are the first to be reprieved.
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i], potential[j]) })
	violating, nonViolating := splitByPDB(potential, pdbs)
	c := &candidate{node: ni.Node().Name}
	reprieve := func(p *framework.PodInfo) (bool, *framework.Status) {
		ni.AddPodInfo(p)
		if st := pl.handle.RunPreFilterExtensionAddPod(ctx, state, pod, p, ni); !st.IsSuccess() {
			return false, st
		}
		if st := pl.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); st.IsSuccess() {
			return true, nil
		}
		ni.RemovePod(p.Pod)
		if st := pl.handle.RunPreFilterExtensionRemovePod(ctx, state, pod, p, ni); !st.IsSuccess() {
			return false, st
		}
		c.victims = append(c.victims, p.Pod)
		return false, nil
	}
	for _, p := range violating {
		fits, st := reprieve(p)
		if st != nil {
			return nil, st
		}
		if !fits {
			c.pdbViolations++
		}
	}
	for _, p := range nonViolating {
		if _, st := reprieve(p); st != nil {
			return nil, st
		}
	}
	if len(c.victims) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	return c, nil
}

func moreImportant(a, b *framework.PodInfo) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return startTime(a.Pod).Before(startTime(b.Pod))
}

func startTime(p *v1.Pod) *metav1.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime
	}
	return &p.CreationTimestamp
}

// splitByPDB separates pods whose eviction would exceed a PDB's allowed disruptions.
func splitByPDB(pods []*framework.PodInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, nonViolating []*framework.PodInfo) {
	allowed := make([]int32, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
	}
	for _, p := range pods {
		violates := false
		if len(p.Pod.Labels) > 0 {
			for i, pdb := range pdbs {
				if pdb.Namespace != p.Pod.Namespace {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Pod.Labels)) {
					continue
				}
				// Pods already counted as disrupted by the PDB controller do not use budget.
				if _, seen := pdb.Status.DisruptedPods[p.Pod.Name]; seen {
					continue
				}
				allowed[i]--
				if allowed[i] < 0 {
					violates = true
				}
			}
		}
		if violates {
			violating = append(violating, p)
		} else {
			nonViolating = append(nonViolating, p)
		}
	}
	return violating, nonViolating
}

// pickCandidate applies upstream's ordering: fewest PDB violations, lowest highest-victim
// priority, lowest priority sum, fewest victims, latest start of highest-priority victims.
func pickCandidate(cs []*candidate) *candidate {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.pdbViolations != b.pdbViolations {
			return a.pdbViolations < b.pdbViolations
		}
		ha, hb := highestPriority(a), highestPriority(b)
		if ha != hb {
			return ha < hb
		}
		sa, sb := prioritySum(a), prioritySum(b)
		if sa != sb {
			return sa < sb
		}
		if len(a.victims) != len(b.victims) {
			return len(a.victims) < len(b.victims)
		}
		ta, tb := earliestStartOfHighest(a), earliestStartOfHighest(b)
		if !ta.Equal(tb) {
			return tb.Before(ta)
		}
		return a.node < b.node
	})
	return cs[0]
}

func highestPriority(c *candidate) int32 {
	h := int32(math.MinInt32)
	for _, v := range c.victims {
		h = max(h, framework.PodPriority(v))
	}
	return h
}

// prioritySum offsets priorities so negative ones still add up positively.
func prioritySum(c *candidate) int64 {
	var s int64
	for _, v := range c.victims {
		s += int64(framework.PodPriority(v)) + int64(math.MaxInt32) + 1
	}
	return s
}

func earliestStartOfHighest(c *candidate) *metav1.Time {
	h := highestPriority(c)
	var earliest *metav1.Time
	for _, v := range c.victims {
		if framework.PodPriority(v) != h {
			continue
		}
		if t := startTime(v); earliest == nil || t.Before(earliest) {
			earliest = t
		}
	}
	return earliest
}

// prepare evicts the victims (marking them with a DisruptionTarget condition first) and
// clears lower-priority nominations on the node so they do not hold the freed room. The
// victims are evicted in parallel: one after another, their API calls were what
// serialized a wave of preemptions (~40 ms per preemptor in bench/scheduler).
func (pl *DefaultPreemption) prepare(ctx context.Context, c *candidate, preemptor *v1.Pod) error {
	client := pl.handle.ClientSet()
	errs := make([]error, len(c.victims))
	pl.handle.Parallelizer().Until(ctx, len(c.victims), func(i int) {
		victim := c.victims[i]
		cond := v1.PodCondition{
			Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName),
			LastTransitionTime: metav1.Now(),
		}
		patch, _ := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"conditions": []v1.PodCondition{cond}}})
		if _, err := client.CoreV1().Pods(victim.Namespace).Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			errs[i] = fmt.Errorf("marking victim %s/%s: %w", victim.Namespace, victim.Name, err)
			return
		}
		if err := client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs[i] = fmt.Errorf("preempting victim %s/%s: %w", victim.Namespace, victim.Name, err)
			return
		}
		pl.handle.EventRecorder().Eventf(victim, preemptor, v1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", preemptor.UID, c.node)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	prio := framework.PodPriority(preemptor)
	for _, p := range pl.handle.NominatedPodsForNode(c.node) {
		if p.Priority >= prio || p.Pod.UID == preemptor.UID {
			continue
		}
		patch := []byte(`{"status":{"nominatedNodeName":null}}`)
		if _, err := client.CoreV1().Pods(p.Pod.Namespace).Patch(ctx, p.Pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("clearing nomination of %s/%s: %w", p.Pod.Namespace, p.Pod.Name, err)
		}
	}
	return nil
}

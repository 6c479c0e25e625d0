package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"mizzen/internal/scheduler/config"
	"mizzen/internal/scheduler/framework"
	"mizzen/internal/scheduler/metrics"
	"mizzen/internal/scheduler/queue"
)

// ErrNoNodesAvailable is the failure when the cluster has no nodes, worded as upstream.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

const (
	// minFeasibleNodesToFind is the fewest nodes sampled in large clusters.
	minFeasibleNodesToFind = 100
	// minFeasibleNodesPercentageToFind is the lowest adaptive percentage.
	minFeasibleNodesPercentageToFind = 5
	// reasonSchedulerError marks attempts that failed on an internal error.
	reasonSchedulerError = "SchedulerError"
)

type scheduleResult struct {
	host      string
	evaluated int
	feasible  int
}

func (s *Scheduler) frameworkFor(pod *v1.Pod) *framework.Framework {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = config.DefaultSchedulerName
	}
	return s.profiles[name]
}

// scheduleOne runs one scheduling cycle and starts its binding cycle; it returns false
// when the queue is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	pInfo, err := s.queue.Pop(ctx)
	if err != nil {
		return false
	}
	pod := pInfo.Pod
	fwk := s.frameworkFor(pod)
	if fwk == nil || pod.DeletionTimestamp != nil || s.cache.IsAssumedPod(pod) {
		s.queue.Done(pod)
		return true
	}
	podCycle := s.queue.SchedulingCycle()
	start := time.Now()
	state := framework.NewCycleState()
	// A copy: the queue may refresh its PodInfo if the pod changes during the cycle.
	podInfo := *pInfo.PodInfo
	if podInfo.Pod == pod {
		state.SetPodInfo(&podInfo)
	}

	s.cache.UpdateSnapshot(s.snapshot)
	result, err := s.schedulePod(ctx, fwk, state, pod)
	if err != nil {
		var fitErr *framework.FitError
		nominated := ""
		clearNomination := false
		status := framework.AsStatus(err)
		if errors.As(err, &fitErr) {
			status = framework.NewStatus(framework.Unschedulable, err.Error())
			if fwk.HasPostFilterPlugins() {
				pfResult, pfStatus := fwk.RunPostFilterPlugins(ctx, state, pod, fitErr.Diagnosis.NodeToStatus)
				if pfStatus.Code() == framework.Error {
					s.logger.Error("running PostFilter plugins", "pod", framework.PodKey(pod), "err", pfStatus.AsError())
				} else if !pfStatus.IsSuccess() {
					fitErr.PostFilterMsg = pfStatus.Message()
				}
				if pfResult != nil {
					nominated = pfResult.NominatedNodeName
					clearNomination = pfResult.ClearNomination
				}
			}
			status = framework.NewStatus(framework.Unschedulable, fitErr.Error())
			pInfo.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins
		} else if errors.Is(err, ErrNoNodesAvailable) {
			status = framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
			pInfo.UnschedulablePlugins = sets.New(queue.NoNodesAvailable)
		}
		s.handleFailure(ctx, fwk, pInfo, status, nominated, clearNomination, podCycle, start)
		return true
	}

	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = result.host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.handleFailure(ctx, fwk, pInfo, framework.AsStatus(err), "", false, podCycle, start)
		return true
	}
	// A pod placed where it was nominated no longer holds that nomination.
	s.queue.DeleteNominatedPodIfExists(pod)

	if st := fwk.RunReservePluginsReserve(ctx, state, assumed, result.host); !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, result.host)
		s.forget(assumed)
		s.handleFailure(ctx, fwk, pInfo, st, "", false, podCycle, start)
		return true
	}
	if st := fwk.RunPermitPlugins(ctx, state, assumed, result.host); !st.IsSuccess() && st.Code() != framework.Wait {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, result.host)
		s.forget(assumed)
		s.handleFailure(ctx, fwk, pInfo, st, "", false, podCycle, start)
		return true
	}

	s.bindWG.Add(1)
	go func() {
		defer s.bindWG.Done()
		s.bindingCycle(ctx, fwk, state, pInfo, assumed, result.host, podCycle, start)
	}()
	return true
}

func (s *Scheduler) forget(assumed *v1.Pod) {
	if err := s.cache.ForgetPod(assumed); err != nil {
		s.logger.Error("forgetting assumed pod", "pod", framework.PodKey(assumed), "err", err)
	}
}

func (s *Scheduler) bindingCycle(ctx context.Context, fwk *framework.Framework, state *framework.CycleState, pInfo *framework.QueuedPodInfo, assumed *v1.Pod, host string, podCycle int64, start time.Time) {
	fail := func(st *framework.Status) {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, host)
		s.forget(assumed)
		// The freed room may help other pods.
		s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete, Label: "AssumedPodDeleted"}, assumed, nil, nil)
		s.handleFailure(ctx, fwk, pInfo, st, "", false, podCycle, start)
	}
	if st := fwk.WaitOnPermit(ctx, assumed); !st.IsSuccess() {
		fail(st)
		return
	}
	if st := fwk.RunPreBindPlugins(ctx, state, assumed, host); !st.IsSuccess() {
		fail(st)
		return
	}
	// The pod's PodScheduled=False from an earlier attempt must not land after the
	// binding's PodScheduled=True.
	s.calls.wait(assumed.UID)
	if !s.bindings.acquire(ctx) {
		fail(framework.AsStatus(ctx.Err()))
		return
	}
	st := fwk.RunBindPlugins(ctx, state, assumed, host)
	s.bindings.release()
	if !st.IsSuccess() {
		fail(st)
		return
	}
	s.cache.FinishBinding(assumed)
	s.metrics.ObserveAttempt(metrics.Scheduled, fwk.ProfileName(), time.Since(start))
	if pInfo.InitialAttemptTimestamp != nil {
		s.metrics.ObserveScheduled(pInfo.Attempts, time.Since(*pInfo.InitialAttemptTimestamp))
	}
	fwk.EventRecorder().Eventf(assumed, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", assumed.Namespace, assumed.Name, host)
	s.queue.Done(assumed)
}

// schedulePod filters and scores nodes for pod.
func (s *Scheduler) schedulePod(ctx context.Context, fwk *framework.Framework, state *framework.CycleState, pod *v1.Pod) (scheduleResult, error) {
	if s.snapshot.NumNodes() == 0 {
		return scheduleResult{}, ErrNoNodesAvailable
	}
	feasible, diagnosis, err := s.findNodesThatFitPod(ctx, fwk, state, pod)
	if err != nil {
		return scheduleResult{}, err
	}
	if len(feasible) == 0 {
		return scheduleResult{}, &framework.FitError{Pod: pod, NumAllNodes: s.snapshot.NumNodes(), Diagnosis: diagnosis}
	}
	evaluated := len(feasible) + len(diagnosis.NodeToStatus)
	if len(feasible) == 1 {
		return scheduleResult{host: feasible[0].Node().Name, evaluated: evaluated, feasible: 1}, nil
	}
	if st := fwk.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return scheduleResult{}, st.AsError()
	}
	totals, st := fwk.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return scheduleResult{}, st.AsError()
	}
	return scheduleResult{host: selectHost(feasible, totals), evaluated: evaluated, feasible: len(feasible)}, nil
}

// selectHost picks the highest total, breaking ties uniformly at random.
func selectHost(nodes []*framework.NodeInfo, totals []int64) string {
	best, ties := 0, 1
	for i := 1; i < len(nodes); i++ {
		switch {
		case totals[i] > totals[best]:
			best, ties = i, 1
		case totals[i] == totals[best]:
			ties++
			if rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return nodes[best].Node().Name
}

// numFeasibleNodesToFind implements upstream's sampling: all nodes below 100, else a
// percentage (adaptive 50% - nodes/125, at least 5%) with a floor of 100 nodes.
func numFeasibleNodesToFind(percentage int32, numAllNodes int) int {
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	adaptive := int(percentage)
	if adaptive <= 0 {
		adaptive = 50 - numAllNodes/125
		if adaptive < minFeasibleNodesPercentageToFind {
			adaptive = minFeasibleNodesPercentageToFind
		}
	}
	if adaptive >= 100 {
		return numAllNodes
	}
	n := numAllNodes * adaptive / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return n
}

func (s *Scheduler) findNodesThatFitPod(ctx context.Context, fwk *framework.Framework, state *framework.CycleState, pod *v1.Pod) ([]*framework.NodeInfo, framework.Diagnosis, error) {
	diagnosis := framework.Diagnosis{NodeToStatus: map[string]*framework.Status{}, UnschedulablePlugins: sets.New[string]()}
	allNodes := s.snapshot.List()
	pfResult, st, rejectors := fwk.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins.Insert(rejectors.UnsortedList()...)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, diagnosis, st.AsError()
		}
		for _, n := range allNodes {
			diagnosis.NodeToStatus[n.Node().Name] = st
		}
		diagnosis.PreFilterMsg = st.Message()
		return nil, diagnosis, nil
	}

	// A pod nominated by an earlier preemption tries its nominated node first.
	if nominated := pod.Status.NominatedNodeName; nominated != "" {
		if ni, err := s.snapshot.Get(nominated); err == nil {
			if st := fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); st.IsSuccess() {
				return []*framework.NodeInfo{ni}, diagnosis, nil
			}
		}
	}

	nodes := allNodes
	if pfResult != nil && pfResult.NodeNames != nil {
		nodes = make([]*framework.NodeInfo, 0, len(pfResult.NodeNames))
		for name := range pfResult.NodeNames {
			if ni, err := s.snapshot.Get(name); err == nil {
				nodes = append(nodes, ni)
			}
		}
		// Nodes left out by PreFilter count in the failure message, as upstream.
		if len(nodes) < len(allNodes) {
			filteredOut := framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", pfResult.Plugins))
			for _, n := range allNodes {
				if _, ok := pfResult.NodeNames[n.Node().Name]; !ok {
					diagnosis.NodeToStatus[n.Node().Name] = filteredOut
				}
			}
			diagnosis.UnschedulablePlugins.Insert(pfResult.Plugins...)
		}
	}
	feasible, err := s.findNodesThatPassFilters(ctx, fwk, state, pod, &diagnosis, nodes)
	return feasible, diagnosis, err
}

func (s *Scheduler) findNodesThatPassFilters(ctx context.Context, fwk *framework.Framework, state *framework.CycleState, pod *v1.Pod, diagnosis *framework.Diagnosis, nodes []*framework.NodeInfo) ([]*framework.NodeInfo, error) {
	percentage := s.percentageOfNodesToScore
	if p := fwk.PercentageOfNodesToScore(); p != nil {
		percentage = *p
	}
	numAll := len(nodes)
	if numAll == 0 {
		return nil, nil
	}
	numToFind := numFeasibleNodesToFind(percentage, numAll)
	feasible := make([]*framework.NodeInfo, numToFind)
	start := s.nextStartNodeIndex % numAll

	if !fwk.HasFilterPlugins() {
		for i := range feasible {
			feasible[i] = nodes[(start+i)%numAll]
		}
		s.nextStartNodeIndex = (start + numToFind) % numAll
		return feasible, nil
	}

	var (
		feasibleCount int32
		processed     int32
		mu            sync.Mutex
		firstErr      error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	check := func(i int) {
		ni := nodes[(start+i)%numAll]
		st := fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		if st.Code() == framework.Error {
			mu.Lock()
			if firstErr == nil {
				firstErr = st.AsError()
			}
			mu.Unlock()
			cancel()
			return
		}
		atomic.AddInt32(&processed, 1)
		if st.IsSuccess() {
			n := atomic.AddInt32(&feasibleCount, 1)
			if int(n) > numToFind {
				cancel()
				atomic.AddInt32(&feasibleCount, -1)
				return
			}
			feasible[n-1] = ni
			return
		}
		mu.Lock()
		diagnosis.NodeToStatus[ni.Node().Name] = st
		diagnosis.UnschedulablePlugins.Insert(st.Plugin())
		mu.Unlock()
	}
	fwk.Parallelizer().Until(ctx, numAll, check)
	if firstErr != nil {
		return nil, firstErr
	}
	s.nextStartNodeIndex = (start + int(processed)) % numAll
	return feasible[:feasibleCount], nil
}

// handleFailure requeues the pod, records a FailedScheduling event and writes the
// PodScheduled=False condition (and any nomination) through pods/status.
func (s *Scheduler) handleFailure(ctx context.Context, fwk *framework.Framework, pInfo *framework.QueuedPodInfo, st *framework.Status, nominated string, clearNomination bool, podCycle int64, start time.Time) {
	pod := pInfo.Pod
	reason := v1.PodReasonUnschedulable
	result := metrics.Unschedulable
	if !st.IsRejected() {
		reason = reasonSchedulerError
		result = metrics.Error
		pInfo.UnschedulablePlugins = nil
	}
	s.metrics.ObserveAttempt(result, fwk.ProfileName(), time.Since(start))
	msg := st.Message()
	if result == metrics.Error {
		msg = st.AsError().Error()
		s.logger.Error("scheduling attempt failed", "pod", framework.PodKey(pod), "err", msg)
	}

	// Requeue unless the pod was deleted or bound meanwhile.
	current, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || current.UID != pod.UID || current.Spec.NodeName != "" {
		s.queue.Done(pod)
		return
	}
	if nominated != "" {
		s.queue.AddNominatedPod(framework.NewPodInfo(pod), nominated)
	} else if clearNomination {
		s.queue.DeleteNominatedPodIfExists(pod)
	}
	s.queue.AddUnschedulableIfNotPresent(pInfo, podCycle)

	fwk.EventRecorder().Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", truncateMessage(msg))
	nominatedField := current.Status.NominatedNodeName
	if nominated != "" {
		nominatedField = nominated
	} else if clearNomination {
		nominatedField = ""
	}
	// The patch is made after the cycle (see podCalls); the nomination is already in
	// the queue's nominator, which is what later cycles read.
	s.calls.run(current.UID, func() {
		if err := s.updatePodStatus(ctx, current, v1.PodCondition{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg,
		}, nominatedField); err != nil {
			s.logger.Error("updating pod status", "pod", framework.PodKey(pod), "err", err)
		}
	})
}

// truncateMessage bounds event notes as upstream (1024 bytes).
func truncateMessage(msg string) string {
	const limit = 1024
	if len(msg) <= limit {
		return msg
	}
	return msg[:limit-3] + "..."
}

// updatePodStatus patches the PodScheduled condition and nominatedNodeName when they
// changed, with a strategic merge patch on the status subresource.
func (s *Scheduler) updatePodStatus(ctx context.Context, pod *v1.Pod, cond v1.PodCondition, nominated string) error {
	var old *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			old = &pod.Status.Conditions[i]
		}
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message &&
		pod.Status.NominatedNodeName == nominated {
		return nil
	}
	now := metav1.Now()
	cond.LastTransitionTime = now
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	status := map[string]interface{}{
		"conditions": []v1.PodCondition{cond},
	}
	if nominated != "" || pod.Status.NominatedNodeName != "" {
		if nominated == "" {
			status["nominatedNodeName"] = nil
		} else {
			status["nominatedNodeName"] = nominated
		}
	}
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patching status of pod %s: %w", framework.PodKey(pod), err)
	}
	return nil
}

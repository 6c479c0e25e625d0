package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/podrestart"
)

// Pod condition reasons, as upstream spells them.
const (
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonPodCompleted             = "PodCompleted"
)

// nanoTime converts a CRI timestamp. Like upstream, a container that never started
// reports the Unix epoch rather than no time.
func nanoTime(ns int64) metav1.Time {
	return metav1.NewTime(time.Unix(0, ns))
}

// terminatedState is the API view of an exited runtime container.
func (kl *Kubelet) terminatedState(c *runtimeapi.ContainerStatus) *v1.ContainerStateTerminated {
	msg := c.Message
	if msg == "" {
		msg = terminationMessage(c)
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      c.Reason,
		Message:     msg,
		StartedAt:   nanoTime(c.StartedAt),
		FinishedAt:  nanoTime(c.FinishedAt),
		ContainerID: kl.containerID(c.Id),
	}
}

func (kl *Kubelet) containerID(id string) string { return kl.runtimeName + "://" + id }

// containerStatus is the API status of one container spec given its runtime instances.
func (kl *Kubelet) containerStatus(pod *v1.Pod, c *v1.Container, rt *podRuntime, st *podState, isInit bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	insts := rt.instances(c.Name)
	waiting, hasWaiting := st.getWaiting(c.Name)
	if len(insts) == 0 {
		// Not created yet: in a pod with init containers, every container waits as
		// PodInitializing (init containers too, as upstream's kubelet reports them).
		reason := reasonContainerCreating
		if len(pod.Spec.InitContainers) > 0 {
			reason = reasonPodInitializing
		}
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting.reason, Message: waiting.message}
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason}
		}
		return cs
	}
	cur := insts[0]
	cs.ContainerID = kl.containerID(cur.Id)
	cs.ImageID = cur.ImageRef
	cs.RestartCount = restartCount(cur)
	if len(insts) > 1 && insts[1].State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.LastTerminationState.Terminated = kl.terminatedState(insts[1])
	}
	switch cur.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: nanoTime(cur.StartedAt)}
		// The resources it runs with, and the requests granted to it (in-place resize).
		if actual, ok := st.actualResources(cur); ok {
			cs.Resources = &actual
			cs.AllocatedResources = actual.Requests
		}
		res, ok := st.probeResults(cur.Id)
		if !ok {
			res = containerProbeResults{ready: c.ReadinessProbe == nil, started: c.StartupProbe == nil}
		}
		cs.Started = ptrBool(res.started)
		cs.Ready = res.started && res.ready
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		cs.Started = ptrBool(false)
		if hasWaiting && (shouldRestart(pod, c, cur) || isSidecar(pod, c)) {
			// Waiting to restart (back-off): the exit becomes the last state.
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting.reason, Message: waiting.message}
			cs.LastTerminationState.Terminated = kl.terminatedState(cur)
		} else {
			cs.State.Terminated = kl.terminatedState(cur)
			// An init container that completed counts as ready, as upstream reports it.
			cs.Ready = isInit && cur.ExitCode == 0 && !isSidecar(pod, c)
		}
	default:
		cs.Started = ptrBool(false)
		reason := reasonContainerCreating
		if hasWaiting {
			reason = waiting.reason
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: waiting.message}
	}
	return cs
}

func ptrBool(b bool) *bool { return &b }

// initStatus reports whether all init containers succeeded, whether one failed for
// good, and the names not yet done.
func initStatus(pod *v1.Pod, rt *podRuntime, st *podState) (done, failed bool, pending []string) {
	sb := rt.readySandbox()
	mainStarted := false
	if sb != nil {
		mainStarted, _ = mainProgress(pod, rt, sb.Id)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var cur *runtimeapi.ContainerStatus
		if sb != nil {
			cur = rt.latestIn(c.Name, sb.Id)
		} else {
			cur = rt.latest(c.Name)
		}
		if isSidecar(pod, c) {
			// Done once started; it never fails the pod, and stays done once the main
			// containers have run.
			if mainStarted || (cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && st.started(cur.Id, c)) {
				continue
			}
			pending = append(pending, c.Name)
			continue
		}
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if cur.ExitCode == 0 {
				continue
			}
			if !shouldRestart(pod, c, cur) {
				failed = true
			}
		}
		pending = append(pending, c.Name)
	}
	return len(pending) == 0, failed, pending
}

// podPhase follows upstream's rules over the containers' API statuses, with each
// container's restart rules and policy (ContainerRestartRules).
func podPhase(pod *v1.Pod, statuses []v1.ContainerStatus, initDone, initFailed, terminal bool) v1.PodPhase {
	if initFailed {
		return v1.PodFailed
	}
	if !initDone {
		return v1.PodPending
	}
	var waiting, running, stopped, succeeded int
	restarting := false // a stopped container will be started again
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
			if c := containerSpec(pod, s.Name); c != nil && podrestart.ContainerRestarts(c, pod.Spec.RestartPolicy, s.State.Terminated.ExitCode) {
				restarting = true
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++ // waiting to restart
				restarting = true
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if terminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		// By each container's restart rules and policy, else the pod's: with the pod's
		// alone, Always keeps the pod Running, Never ends it, OnFailure ends it once
		// every container succeeded.
		if restarting {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

// generateStatus computes the pod's status from the runtime and the worker's memory.
// terminal is set when the pod is being deleted and its containers are stopped.
func (kl *Kubelet) generateStatus(pod *v1.Pod, rt *podRuntime, st *podState, terminal bool) v1.PodStatus {
	old := pod.Status
	s := v1.PodStatus{
		QOSClass: qosClass(pod),
		// The generation of the spec this status reflects, as upstream's kubelet reports it.
		ObservedGeneration: pod.Generation,
		HostIP:             kl.opts.NodeIP,
		HostIPs:            []v1.HostIP{{IP: kl.opts.NodeIP}},
		StartTime:          old.StartTime,
		PodIPs:             old.PodIPs,
		PodIP:              old.PodIP,
		Conditions:         nil,
	}
	if s.StartTime == nil {
		t := metav1.NewTime(kl.clock.Now())
		if !st.startTime.IsZero() {
			t = metav1.NewTime(st.startTime)
		}
		s.StartTime = &t
	}
	sb := rt.readySandbox()
	if ips := kl.podIPs(pod, sb); len(ips) > 0 {
		s.PodIP = ips[0]
		s.PodIPs = nil
		for _, ip := range ips {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}

	initDone, initFailed, pendingInit := initStatus(pod, rt, st)
	for i := range pod.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses,
			kl.containerStatus(pod, &pod.Spec.InitContainers[i], rt, st, true))
	}
	for i := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses,
			kl.containerStatus(pod, &pod.Spec.Containers[i], rt, st, false))
	}
	// An init or app container not created yet has not started (false, not unset), as
	// upstream's prober reports every one of them; clients dereference it.
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			if list[i].Started == nil {
				list[i].Started = ptrBool(false)
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, kl.containerStatus(pod, c, rt, st, false))
	}
	keepTerminated(pod, &old, &s)
	if terminal {
		markUnlocatedContainers(pod, &s)
	}
	s.Phase = podPhase(pod, s.ContainerStatuses, initDone, initFailed, terminal)
	if terminal && s.Phase != v1.PodSucceeded && s.Phase != v1.PodFailed && kl.static.get(pod.UID) == nil {
		// A pod ends in a terminal phase before its deletion, even one deleted before any
		// container started (a Job's pod failure policy waits for it), as upstream's
		// status manager ends it; static pods excepted, as there.
		s.Phase = v1.PodFailed
	}
	if old.Phase == v1.PodSucceeded || old.Phase == v1.PodFailed {
		s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message // terminal phases are final
	}
	s.Conditions = kl.podConditions(pod, st, s, sb != nil, initDone, pendingInit)
	return s
}

// keepTerminated leaves terminated every container the API already shows terminated
// that is not restarted, as upstream's kubelet does: the apiserver refuses a status
// taking such a container out of the terminated state, and a container the runtime
// no longer has would otherwise show as waiting again.
func keepTerminated(pod *v1.Pod, old, s *v1.PodStatus) {
	keep := func(statuses, oldStatuses []v1.ContainerStatus, specContainers []v1.Container) {
		for i := range statuses {
			if statuses[i].State.Terminated != nil {
				continue
			}
			for _, o := range oldStatuses {
				if o.Name != statuses[i].Name || o.State.Terminated == nil {
					continue
				}
				if !podrestart.MayLeaveTerminated(&pod.Spec, specContainers, o.Name, o.State.Terminated.ExitCode) {
					statuses[i].State = *o.State.DeepCopy()
					statuses[i].Ready, statuses[i].Started = o.Ready, ptrBool(false)
				}
				break
			}
		}
	}
	keep(s.InitContainerStatuses, old.InitContainerStatuses, pod.Spec.InitContainers)
	keep(s.ContainerStatuses, old.ContainerStatuses, pod.Spec.Containers)
	keep(s.EphemeralContainerStatuses, old.EphemeralContainerStatuses, nil)
}

// Upstream's words for a container that has no terminated state when its pod ends.
const (
	reasonContainerStatusUnknown = "ContainerStatusUnknown"
	messageContainerNotLocated   = "The container could not be located when the pod was terminated"
	exitCodeContainerNotLocated  = 137
)

// markUnlocatedContainers gives every container of an ended pod that has no terminated
// state one, a failure, since whether it succeeded is not known; as upstream's status
// manager does when a pod terminates. The regular containers only once the pod has
// initialized; of the init containers, all but the trailing ones that never left waiting
// (yet always the first).
func markUnlocatedContainers(pod *v1.Pod, s *v1.PodStatus) {
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: reasonContainerStatusUnknown, Message: messageContainerNotLocated, ExitCode: exitCodeContainerNotLocated}}
	if podHasInitialized(pod, s) {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				s.ContainerStatuses[i].State = *unknown.DeepCopy()
			}
		}
	}
	attempted := len(s.InitContainerStatuses)
	for attempted > 1 && s.InitContainerStatuses[attempted-1].State.Waiting != nil {
		attempted--
	}
	for i := range s.InitContainerStatuses[:attempted] {
		if s.InitContainerStatuses[i].State.Terminated == nil {
			s.InitContainerStatuses[i].State = *unknown.DeepCopy()
		}
	}
}

// podHasInitialized reports whether a pod shows it got past its init containers: it has
// none, a regular container left waiting once, or its last init container completed (or,
// a sidecar, started).
func podHasInitialized(pod *v1.Pod, s *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, cs := range s.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	if len(s.InitContainerStatuses) == 0 {
		return false
	}
	last := s.InitContainerStatuses[len(s.InitContainerStatuses)-1]
	spec := &pod.Spec.InitContainers[len(pod.Spec.InitContainers)-1]
	if spec.Name != last.Name {
		return false
	}
	if isSidecar(pod, spec) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	for _, t := range []*v1.ContainerStateTerminated{last.LastTerminationState.Terminated, last.State.Terminated} {
		if t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

// podConditions computes the kubelet-owned conditions, keeping others (PodScheduled as
// the scheduler wrote it, DisruptionTarget, readiness gates) and transition times.
func (kl *Kubelet) podConditions(pod *v1.Pod, st *podState, s v1.PodStatus, sandboxReady, initDone bool, pendingInit []string) []v1.PodCondition {
	completed := s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed
	// The sidecars' readiness counts as the main containers' does, as upstream's.
	var unready []string
	for _, cs := range s.InitContainerStatuses {
		if c := containerSpec(pod, cs.Name); c != nil && isSidecar(pod, c) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c = v1.PodCondition{Type: t, Status: v1.ConditionTrue}
		}
		return c
	}
	initCond := cond(v1.PodInitialized, initDone, reasonContainersNotInitialized,
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(pendingInit, " ")))
	if completed && initDone && len(pod.Spec.InitContainers) > 0 {
		initCond.Reason = reasonPodCompleted
	}
	ready := len(unready) == 0 && !completed
	notReadyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	reason := reasonContainersNotReady
	if completed {
		reason, notReadyMsg = reasonPodCompleted, ""
	}
	podReady := cond(v1.PodReady, ready, reason, notReadyMsg)
	if gates := unmetReadinessGates(pod); ready && gates != "" {
		podReady = cond(v1.PodReady, false, reasonReadinessGatesNotReady, gates)
	}
	owned := []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, sandboxReady, "", ""),
		initCond,
		cond(v1.ContainersReady, ready, reason, notReadyMsg),
		podReady,
	}
	// The resize conditions exist only while a resize is refused or failing.
	switch rs := st.resizeStatus(); {
	case rs.pending != "":
		owned = append(owned, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: rs.pending, Message: rs.message})
	case rs.inProgress:
		owned = append(owned, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: v1.PodReasonError, Message: rs.message})
	}
	var out []v1.PodCondition
	now := metav1.NewTime(kl.clock.Now())
	hasScheduled := false
	for _, c := range owned {
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = now
		if c.Type == v1.PodReadyToStartContainers && c.Status == v1.ConditionTrue && !st.sandboxReadyAt.IsZero() {
			c.LastTransitionTime = metav1.NewTime(st.sandboxReadyAt)
		}
		for _, o := range pod.Status.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
				c.LastProbeTime = o.LastProbeTime
			}
		}
		out = append(out, c)
	}
	for _, o := range pod.Status.Conditions {
		if o.Type == v1.PodResizePending || o.Type == v1.PodResizeInProgress ||
			slices.ContainsFunc(owned, func(c v1.PodCondition) bool { return c.Type == o.Type }) {
			continue
		}
		if o.Type == v1.PodScheduled {
			// The kubelet reports PodScheduled too, as upstream's: its observedGeneration
			// follows the pod's updates like the conditions above.
			hasScheduled = true
			o.ObservedGeneration = pod.Generation
		}
		out = append(out, o)
	}
	if !hasScheduled {
		out = append(out, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now, ObservedGeneration: pod.Generation})
	}
	return out
}

// reasonReadinessGatesNotReady is upstream's reason for a pod whose containers are
// ready but one of whose readiness gates is not.
const reasonReadinessGatesNotReady = "ReadinessGatesNotReady"

// unmetReadinessGates says which of the pod's readiness gates hold it back from Ready,
// in upstream's words, or "" when all their conditions are True. The conditions are
// written by others (a load balancer controller, say) through pods/status; the kubelet
// only reads them.
func unmetReadinessGates(pod *v1.Pod) string {
	var unmet []string
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(pod.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == g.ConditionType })
		switch {
		case i < 0:
			unmet = append(unmet, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case pod.Status.Conditions[i].Status != v1.ConditionTrue:
			unmet = append(unmet, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, pod.Status.Conditions[i].Status))
		}
	}
	return strings.Join(unmet, ", ")
}

// writeStatus posts the status through pods/status if it differs from the pod's, as
// the API would store it (times to the second). pod is the informer's or, until the
// watch delivers it, the one the last write returned (see statusWrites).
func (kl *Kubelet) writeStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	target := kl.statusTarget(pod)
	normalizeStatus(&status)
	if target == nil || statusesEqual(&target.Status, &status) {
		return nil
	}
	// Keep the order of conditions stable against the old one to avoid needless writes.
	updated := target.DeepCopy()
	updated.Status = status
	written, err := kl.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// The watch will deliver the newer pod and poke the worker again.
		kl.workers.poke(pod.UID)
		return nil
	}
	if apierrors.IsNotFound(err) {
		// The pod is gone from the API; its deletion, on the watch, wakes the worker to
		// tear it down. Upstream's status manager drops such a status the same way
		// rather than retrying it.
		return nil
	}
	if err == nil && target == pod {
		kl.statusWrites.wrote(target, written)
	}
	return err
}

// statusesEqual reports whether two pod statuses are semantically equal. Most syncs
// find the status unchanged, and comparing the two encodings costs a twelfth of
// Semantic.DeepEqual's reflection (BenchmarkStatusesEqual), which decides only when the
// encodings differ (a quantity written another way, say).
func statusesEqual(x, y *v1.PodStatus) bool {
	a, errA := x.Marshal()
	b, errB := y.Marshal()
	if errA == nil && errB == nil && bytes.Equal(a, b) {
		return true
	}
	return apiequality.Semantic.DeepEqual(*x, *y)
}

// normalizeStatus rounds the status's times to the second, as the API stores them
// (RFC 3339), so that a status that has not changed compares equal to the stored one
// and is not written again on every sync (upstream's status manager does the same).
func normalizeStatus(s *v1.PodStatus) {
	round := func(t *metav1.Time) {
		if t != nil {
			*t = t.Rfc3339Copy()
		}
	}
	state := func(c *v1.ContainerState) {
		if c.Running != nil {
			round(&c.Running.StartedAt)
		}
		if c.Terminated != nil {
			round(&c.Terminated.StartedAt)
			round(&c.Terminated.FinishedAt)
		}
	}
	round(s.StartTime)
	for i := range s.Conditions {
		round(&s.Conditions[i].LastProbeTime)
		round(&s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			state(&list[i].State)
			state(&list[i].LastTerminationState)
		}
	}
}

// statusWrites remembers, per pod, the pod as the API returned it from the kubelet's
// last status write, until the watch delivers a newer version than the one that write
// was made over (or the same status). A sync in between works from what was written,
// not from the watch's older copy: it neither writes the same status again nor conflicts on the stale
// resourceVersion, and the conditions keep the transition times just written.
type statusWrites struct {
	mu   sync.Mutex
	pods map[types.UID]statusWrite
}

type statusWrite struct {
	seenRV string  // the watch's resourceVersion of the pod when the writes began
	pod    *v1.Pod // as the last write returned it
}

func newStatusWrites() *statusWrites { return &statusWrites{pods: map[types.UID]statusWrite{}} }

// current is the newest version of pod the kubelet knows: the last write's result
// while the watch has not moved past the version it was made over, else pod itself.
func (s *statusWrites) current(pod *v1.Pod) *v1.Pod {
	if s == nil || pod == nil {
		return pod
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.pods[pod.UID]
	if !ok {
		return pod
	}
	if w.seenRV != pod.ResourceVersion || statusesEqual(&pod.Status, &w.pod.Status) {
		delete(s.pods, pod.UID) // the watch has caught up (or moved on)
		return pod
	}
	// The watch's metadata and spec (the status subresource changes neither), the
	// status and resourceVersion the write left.
	cur := *pod
	cur.ResourceVersion, cur.Status = w.pod.ResourceVersion, w.pod.Status
	return &cur
}

// wrote records a successful write over target (the watch's pod or an earlier write's
// result).
func (s *statusWrites) wrote(target, written *v1.Pod) {
	if s == nil || written == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := target.ResourceVersion
	if w, ok := s.pods[target.UID]; ok && w.pod.ResourceVersion == target.ResourceVersion {
		seen = w.seenRV // a second write before the watch delivered the first
	}
	s.pods[target.UID] = statusWrite{seenRV: seen, pod: written}
}

// isResultOfLastWrite reports whether pod is the version the kubelet's last status write
// of it returned.
func (s *statusWrites) isResultOfLastWrite(pod *v1.Pod) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.pods[pod.UID]
	return ok && w.pod.ResourceVersion == pod.ResourceVersion
}

func (s *statusWrites) forget(uid types.UID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

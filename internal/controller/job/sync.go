package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/controller/util"
)

// Condition reasons, as upstream.
const (
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonDeadlineExceeded     = "DeadlineExceeded"
	ReasonPodFailurePolicy     = "PodFailurePolicy"
	ReasonCompletionsReached   = "CompletionsReached"
	ReasonSuspended            = "JobSuspended"
	ReasonResumed              = "JobResumed"
)

// jobSync is one pass over one Job.
type jobSync struct {
	c     *Controller
	key   string
	job   *batchv1.Job
	st    *batchv1.JobStatus
	now   time.Time
	pods  []*corev1.Pod
	dirty bool
	// failedIndexes are the indexes that exhausted backoffLimitPerIndex.
	failedIndexes map[int]bool
}

// Sync reconciles the Job (or orphaned pod) named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	if strings.HasPrefix(key, orphanPrefix) {
		return c.syncOrphanPod(ctx, key)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	if m := cached.Spec.ManagedBy; m != nil && *m != batchv1.JobControllerName {
		// Another controller (e.g. Kueue's MultiKueue) owns this Job's pods and status.
		return nil
	}
	job := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || job.Spec.Selector == nil {
		return nil
	}
	all, err := util.ControlledOrOrphans[*corev1.Pod](c.podInformer, ns, job.UID)
	if err != nil {
		return err
	}
	claimer := util.Claimer{Owner: job, OwnerGVK: jobGVK, Selector: sel, Patch: util.PodPatcher(c.client, ns)}
	pods, claimErr := util.Claim(ctx, claimer, all)
	if claimErr != nil {
		return claimErr
	}
	s := &jobSync{c: c, key: key, job: job, st: job.Status.DeepCopy(), now: c.clock.Now(), pods: pods}
	if isFinished(job) {
		// Counted long ago: only release leftovers from the finalizer.
		var errs []error
		for _, p := range pods {
			if hasFinalizer(p) {
				errs = append(errs, c.removeFinalizer(ctx, p))
			}
		}
		return errors.Join(errs...)
	}
	return s.run(ctx)
}

func (s *jobSync) completions() (int32, bool) {
	if s.job.Spec.Completions == nil {
		return 0, false
	}
	return *s.job.Spec.Completions, true
}

func (s *jobSync) indexed() bool {
	return s.job.Spec.CompletionMode != nil && *s.job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func (s *jobSync) parallelism() int32 {
	if s.job.Spec.Parallelism == nil {
		return 1
	}
	return *s.job.Spec.Parallelism
}

// onlyReplaceFailed: podReplacementPolicy Failed waits for a terminating pod to reach
// phase Failed before counting and replacing it.
func (s *jobSync) onlyReplaceFailed() bool {
	p := s.job.Spec.PodReplacementPolicy
	return p != nil && *p == batchv1.Failed
}

// podFailed: a pod in phase Failed, or (unless podReplacementPolicy is Failed) one being
// deleted before it succeeded, which will never report a result; as upstream counts.
func (s *jobSync) podFailed(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	return !s.onlyReplaceFailed() && p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func (s *jobSync) podDone(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || s.podFailed(p)
}

func (s *jobSync) run(ctx context.Context) error {
	job := s.job
	satisfied := s.c.expectations.Satisfied(s.key)

	// 1. Record newly finished pods in uncountedTerminatedPods before touching their
	// finalizers, so a crash between the two steps loses nothing.
	uncounted := s.st.UncountedTerminatedPods
	if uncounted == nil {
		uncounted = &batchv1.UncountedTerminatedPods{}
		s.st.UncountedTerminatedPods = uncounted
	}
	inUncounted := map[types.UID]bool{}
	for _, uid := range append(append([]types.UID(nil), uncounted.Succeeded...), uncounted.Failed...) {
		inUncounted[uid] = true
	}
	limit := int(0)
	if n, ok := s.completions(); ok {
		limit = int(n)
	}
	completed := parseIndexes(s.st.CompletedIndexes, limit)
	s.failedIndexes = map[int]bool{}
	if s.perIndex() && s.st.FailedIndexes != nil {
		s.failedIndexes = parseIndexes(*s.st.FailedIndexes, limit)
	}
	var ignored []*corev1.Pod
	var failJobMessage string
	var active, terminating []*corev1.Pod
	for _, p := range s.pods {
		if s.c.isUncounting(p.UID) {
			continue
		}
		switch {
		case s.podDone(p) && hasFinalizer(p) && !inUncounted[p.UID]:
			switch {
			case p.Status.Phase == corev1.PodSucceeded:
				if s.indexed() {
					if i := podIndex(p); i < 0 || i >= limit || completed[i] {
						ignored = append(ignored, p)
						continue
					}
				}
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
			case p.Status.Phase != corev1.PodFailed && (s.suspended() || s.finishingCondition() != nil):
				// Deleted because the Job was suspended or has finished: not a failure.
				ignored = append(ignored, p)
				continue
			default:
				action, msg := matchFailurePolicy(job.Spec.PodFailurePolicy, p)
				if action != nil && *action == batchv1.PodFailurePolicyActionIgnore {
					ignored = append(ignored, p)
					continue
				}
				if action != nil && *action == batchv1.PodFailurePolicyActionFailJob && failJobMessage == "" {
					failJobMessage = msg
				}
				uncounted.Failed = append(uncounted.Failed, p.UID)
			}
			inUncounted[p.UID] = true
			s.dirty = true
		case !s.podDone(p) && p.DeletionTimestamp == nil:
			active = append(active, p)
		case p.DeletionTimestamp != nil && !util.IsPodTerminal(p):
			terminating = append(terminating, p)
		}
	}
	if s.dirty {
		if err := s.flush(ctx); err != nil {
			return err
		}
		uncounted = s.st.UncountedTerminatedPods
	}

	// 2. Release the finalizers of every finished pod, 3. then count those released.
	var errs []error
	released := map[types.UID]bool{}
	for _, p := range s.pods {
		if !hasFinalizer(p) || s.c.isUncounting(p.UID) || !s.podDone(p) {
			continue
		}
		if !inUncounted[p.UID] && !containsPod(ignored, p) {
			continue
		}
		if err := s.c.removeFinalizer(ctx, p); err != nil {
			errs = append(errs, err)
			continue
		}
		released[p.UID] = true
		s.c.markUncounting(p.UID)
	}
	podsByUID := map[types.UID]*corev1.Pod{}
	for _, p := range s.pods {
		podsByUID[p.UID] = p
	}
	countable := func(uid types.UID) bool {
		p, ok := podsByUID[uid]
		return !ok || released[uid] || !hasFinalizer(p)
	}
	var stillSucceeded, stillFailed []types.UID
	for _, uid := range uncounted.Succeeded {
		if !countable(uid) {
			stillSucceeded = append(stillSucceeded, uid)
			continue
		}
		s.st.Succeeded++
		if p, ok := podsByUID[uid]; ok && s.indexed() {
			completed[podIndex(p)] = true
		}
		s.dirty = true
	}
	for _, uid := range uncounted.Failed {
		if !countable(uid) {
			stillFailed = append(stillFailed, uid)
			continue
		}
		s.st.Failed++
		s.dirty = true
		if p, ok := podsByUID[uid]; ok && s.perIndex() {
			if i := podIndex(p); i >= 0 && i < limit {
				action, _ := matchFailurePolicy(job.Spec.PodFailurePolicy, p)
				if (action != nil && *action == batchv1.PodFailurePolicyActionFailIndex) || indexFailureCount(p)+1 > *job.Spec.BackoffLimitPerIndex {
					s.failedIndexes[i] = true
				}
			}
		}
	}
	if s.perIndex() {
		failedIndexes := formatIndexes(s.failedIndexes)
		s.st.FailedIndexes = &failedIndexes
	}
	uncounted.Succeeded, uncounted.Failed = stillSucceeded, stillFailed
	if s.indexed() {
		s.st.CompletedIndexes = formatIndexes(completed)
	}
	succeeded := s.st.Succeeded + int32(len(uncounted.Succeeded))
	failed := s.st.Failed + int32(len(uncounted.Failed))

	// 4. Decide whether the Job has met its success or failure criteria.
	finishing := s.finishingCondition()
	if finishing == nil {
		switch {
		case failJobMessage != "":
			finishing = s.setCondition(batchv1.JobFailureTarget, ReasonPodFailurePolicy, failJobMessage)
		case s.perIndex() && job.Spec.MaxFailedIndexes != nil && len(s.failedIndexes) > int(*job.Spec.MaxFailedIndexes):
			finishing = s.setCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes")
		case s.perIndex() && len(s.failedIndexes) > 0 && len(completed)+len(s.failedIndexes) >= limit:
			finishing = s.setCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes")
		case !s.perIndex() && failed > s.backoffLimit():
			finishing = s.setCondition(batchv1.JobFailureTarget, ReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		case s.pastActiveDeadline():
			finishing = s.setCondition(batchv1.JobFailureTarget, ReasonDeadlineExceeded, "Job was active longer than specified deadline")
		case s.indexed() && s.job.Spec.SuccessPolicy != nil && successPolicyRule(s.job.Spec.SuccessPolicy, completed, limit) >= 0:
			finishing = s.setCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy,
				fmt.Sprintf("Matched rules at index %d", successPolicyRule(s.job.Spec.SuccessPolicy, completed, limit)))
		case s.succeededEnough(succeeded, completed, len(active)):
			finishing = s.setCondition(batchv1.JobSuccessCriteriaMet, ReasonCompletionsReached, "Reached expected number of succeeded pods")
		}
	}

	suspended := s.suspended()
	switch {
	case finishing != nil:
		// Stop what still runs; declare the outcome once every pod has terminated and
		// been counted.
		if err := s.deletePods(ctx, active); err != nil {
			errs = append(errs, err)
		}
		if len(active) == 0 && len(terminating) == 0 && len(uncounted.Succeeded)+len(uncounted.Failed) == 0 {
			final := batchv1.JobComplete
			if finishing.Type == batchv1.JobFailureTarget {
				final = batchv1.JobFailed
			} else {
				t := metav1.NewTime(s.now)
				s.st.CompletionTime = &t
			}
			s.setCondition(final, finishing.Reason, finishing.Message)
			if final == batchv1.JobComplete {
				s.c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
			} else {
				s.c.recorder.Event(job, corev1.EventTypeWarning, finishing.Reason, finishing.Message)
			}
		}
		active = nil
	case suspended:
		if err := s.deletePods(ctx, active); err != nil {
			errs = append(errs, err)
		}
		active = nil
		if c := s.condition(batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionTrue {
			s.setCondition(batchv1.JobSuspended, ReasonSuspended, "Job suspended")
			s.c.recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
		}
	default:
		if c := s.condition(batchv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
			s.setConditionStatus(batchv1.JobSuspended, corev1.ConditionFalse, ReasonResumed, "Job resumed")
			s.c.recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
			t := metav1.NewTime(s.now)
			s.st.StartTime = &t
		}
		if s.st.StartTime == nil {
			t := metav1.NewTime(s.now)
			s.st.StartTime = &t
		}
		if satisfied {
			var err error
			if active, err = s.manage(ctx, active, terminating, succeeded, completed); err != nil {
				errs = append(errs, err)
			}
		}
		if d := s.job.Spec.ActiveDeadlineSeconds; d != nil {
			s.c.queue.AddAfter(s.key, s.st.StartTime.Add(time.Duration(*d)*time.Second).Sub(s.now)+time.Second)
		}
	}

	s.st.Active = int32(len(active))
	ready := int32(0)
	for _, p := range active {
		if util.IsPodReady(p) {
			ready++
		}
	}
	s.st.Ready = &ready
	term := int32(len(terminating))
	s.st.Terminating = &term
	if err := s.flush(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func containsPod(list []*corev1.Pod, p *corev1.Pod) bool {
	for _, q := range list {
		if q.UID == p.UID {
			return true
		}
	}
	return false
}

func (c *Controller) isUncounting(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uncounting[uid]
}

func (c *Controller) markUncounting(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uncounting[uid] = true
}

// perIndex: an Indexed Job with backoffLimitPerIndex counts failures per index.
func (s *jobSync) perIndex() bool {
	return s.indexed() && s.job.Spec.BackoffLimitPerIndex != nil
}

// indexFailureCount is how many times the pod's index had failed before it was made.
func indexFailureCount(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Annotations[batchv1.JobIndexFailureCountAnnotation])
	if err != nil {
		return 0
	}
	return int32(n)
}

// nextIndexFailureCount is the failure count for a new pod of index: one more than the
// latest failed pod of that index carried.
func (s *jobSync) nextIndexFailureCount(index int) int32 {
	var n int32
	for _, p := range s.pods {
		if podIndex(p) == index && p.Status.Phase == corev1.PodFailed {
			if action, _ := matchFailurePolicy(s.job.Spec.PodFailurePolicy, p); action != nil && *action == batchv1.PodFailurePolicyActionIgnore {
				n = max(n, indexFailureCount(p))
				continue
			}
			n = max(n, indexFailureCount(p)+1)
		}
	}
	return n
}

func (s *jobSync) suspended() bool {
	return s.job.Spec.Suspend != nil && *s.job.Spec.Suspend
}

func (s *jobSync) backoffLimit() int32 {
	if s.job.Spec.BackoffLimit == nil {
		return 6
	}
	return *s.job.Spec.BackoffLimit
}

func (s *jobSync) pastActiveDeadline() bool {
	d := s.job.Spec.ActiveDeadlineSeconds
	if d == nil || s.st.StartTime == nil || (s.job.Spec.Suspend != nil && *s.job.Spec.Suspend) {
		return false
	}
	return !s.now.Before(s.st.StartTime.Add(time.Duration(*d) * time.Second))
}

func (s *jobSync) succeededEnough(succeeded int32, completed map[int]bool, active int) bool {
	n, ok := s.completions()
	switch {
	case s.indexed():
		return len(completed) >= int(n)
	case ok:
		return succeeded >= n
	default:
		// No completions: one success is enough once nothing else runs.
		return succeeded > 0 && active == 0
	}
}

// successPolicyRule returns the index of the first successPolicy rule that the
// completed indexes meet, or -1.
func successPolicyRule(policy *batchv1.SuccessPolicy, completed map[int]bool, limit int) int {
	for i, rule := range policy.Rules {
		switch {
		case rule.SucceededIndexes != nil:
			wanted := parseIndexes(*rule.SucceededIndexes, limit)
			done := 0
			for idx := range wanted {
				if completed[idx] {
					done++
				}
			}
			if (rule.SucceededCount != nil && done >= int(*rule.SucceededCount)) || (rule.SucceededCount == nil && done == len(wanted)) {
				return i
			}
		case rule.SucceededCount != nil && len(completed) >= int(*rule.SucceededCount):
			return i
		}
	}
	return -1
}

func (s *jobSync) condition(t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range s.st.Conditions {
		if s.st.Conditions[i].Type == t {
			return &s.st.Conditions[i]
		}
	}
	return nil
}

func (s *jobSync) finishingCondition() *batchv1.JobCondition {
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet} {
		if c := s.condition(t); c != nil && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func (s *jobSync) setCondition(t batchv1.JobConditionType, reason, msg string) *batchv1.JobCondition {
	return s.setConditionStatus(t, corev1.ConditionTrue, reason, msg)
}

func (s *jobSync) setConditionStatus(t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) *batchv1.JobCondition {
	now := metav1.NewTime(s.now)
	if c := s.condition(t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, msg, now
		s.dirty = true
		return c
	}
	s.st.Conditions = append(s.st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg,
		LastProbeTime: now, LastTransitionTime: now})
	s.dirty = true
	return &s.st.Conditions[len(s.st.Conditions)-1]
}

// flush writes the working status if it differs from the Job's.
func (s *jobSync) flush(ctx context.Context) error {
	if apiequality.Semantic.DeepEqual(*s.st, s.job.Status) {
		return nil
	}
	job := s.job.DeepCopy()
	job.Status = *s.st.DeepCopy()
	got, err := s.c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	s.job = got
	s.st = got.Status.DeepCopy()
	if s.st.UncountedTerminatedPods == nil {
		s.st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	s.dirty = false
	return nil
}

func (s *jobSync) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	s.c.expectations.Expect(s.key, 0, uids)
	var errs []error
	for _, p := range pods {
		err := s.c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil {
			s.c.expectations.DeletionObserved(s.key, p.UID)
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		s.c.recorder.Eventf(s.job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	}
	return errors.Join(errs...)
}

// manage creates or deletes pods toward the wanted number of active ones and returns
// the pods still active afterwards.
func (s *jobSync) manage(ctx context.Context, active, terminating []*corev1.Pod, succeeded int32, completed map[int]bool) ([]*corev1.Pod, error) {
	var toDelete []*corev1.Pod
	var toCreate []int // completion indexes; -1 for NonIndexed
	parallelism := int(s.parallelism())
	// With podReplacementPolicy Failed, terminating pods hold their slot (and index)
	// until they are gone or Failed.
	var holding []*corev1.Pod
	if s.onlyReplaceFailed() {
		holding = terminating
	}
	if s.indexed() {
		n, _ := s.completions()
		seen := map[int]bool{}
		for _, p := range holding {
			seen[podIndex(p)] = true
		}
		var keep []*corev1.Pod
		sort.SliceStable(active, func(i, j int) bool { return podIndex(active[i]) < podIndex(active[j]) })
		for _, p := range active {
			i := podIndex(p)
			if i < 0 || i >= int(n) || completed[i] || s.failedIndexes[i] || seen[i] {
				toDelete = append(toDelete, p)
				continue
			}
			seen[i] = true
			keep = append(keep, p)
		}
		if len(keep) > parallelism {
			toDelete = append(toDelete, keep[parallelism:]...)
			keep = keep[:parallelism]
		}
		for i := 0; i < int(n) && len(keep)+len(holding)+len(toCreate) < parallelism; i++ {
			if !completed[i] && !s.failedIndexes[i] && !seen[i] {
				toCreate = append(toCreate, i)
			}
		}
		active = keep
	} else {
		want := parallelism
		if n, ok := s.completions(); ok {
			want = min(want, max(int(n-succeeded), 0))
		} else if succeeded > 0 {
			want = 0
		}
		if len(active) > want {
			// Not ready and newest first.
			sort.SliceStable(active, func(i, j int) bool {
				if ri, rj := util.IsPodReady(active[i]), util.IsPodReady(active[j]); ri != rj {
					return !ri
				}
				return active[j].CreationTimestamp.Before(&active[i].CreationTimestamp)
			})
			toDelete = active[:len(active)-want]
			active = active[len(active)-want:]
		}
		for range want - len(active) - len(holding) {
			toCreate = append(toCreate, -1)
		}
	}
	if len(toDelete) > 0 {
		return active, s.deletePods(ctx, toDelete)
	}
	if len(toCreate) == 0 {
		return active, nil
	}
	if wait := s.backoffRemaining(); wait > 0 {
		s.c.queue.AddAfter(s.key, wait)
		return active, nil
	}
	s.c.expectations.Expect(s.key, len(toCreate), nil)
	next := make(chan int, len(toCreate))
	for _, i := range toCreate {
		next <- i
	}
	close(next)
	created, err := util.SlowStartBatch(len(toCreate), func() error {
		name, err := util.CreatePod(ctx, s.c.client, s.newPod(<-next))
		if err != nil {
			s.c.recorder.Eventf(s.job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			return err
		}
		s.c.recorder.Eventf(s.job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", name)
		return nil
	})
	for range len(toCreate) - created {
		s.c.expectations.CreationObserved(s.key)
	}
	if err != nil {
		return active, fmt.Errorf("creating pods for job %s: %w", s.key, err)
	}
	return active, nil
}

// backoffRemaining is how long to wait before replacing failed pods: 10s doubling per
// failure since the last success, capped at 6 minutes, counted from the last failure.
func (s *jobSync) backoffRemaining() time.Duration {
	var lastSuccess, lastFailure time.Time
	for _, p := range s.pods {
		if t := finishTime(p); p.Status.Phase == corev1.PodSucceeded && t.After(lastSuccess) {
			lastSuccess = t
		}
	}
	failures := 0
	for _, p := range s.pods {
		if action, _ := matchFailurePolicy(s.job.Spec.PodFailurePolicy, p); action != nil && *action == batchv1.PodFailurePolicyActionIgnore {
			continue
		}
		if p.Status.Phase == corev1.PodFailed {
			t := finishTime(p)
			if t.After(lastSuccess) {
				failures++
				if t.After(lastFailure) {
					lastFailure = t
				}
			}
		}
	}
	if failures == 0 {
		return 0
	}
	delay := DefaultBackoff
	for i := 1; i < failures && delay < MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, MaxBackoff)
	return lastFailure.Add(delay).Sub(s.now)
}

// finishTime is when the pod's last container terminated, or the best guess we have.
func finishTime(p *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if !t.IsZero() {
		return t
	}
	if c := util.PodReadyCondition(p); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Time
	}
	return p.CreationTimestamp.Time
}

// newPod builds a pod of the Job; index >= 0 for Indexed Jobs.
func (s *jobSync) newPod(index int) *corev1.Pod {
	generateName := s.job.Name + "-"
	if index >= 0 {
		generateName = fmt.Sprintf("%s-%d-", s.job.Name, index)
	}
	pod := util.PodFromTemplate(&s.job.Spec.Template, s.job, jobGVK, "", generateName)
	pod.Finalizers = append(pod.Finalizers, batchv1.JobTrackingFinalizer)
	if index < 0 {
		return pod
	}
	idx := strconv.Itoa(index)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Annotations[CompletionIndexKey] = idx
	if s.perIndex() {
		pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(s.nextIndexFailureCount(index)))
	}
	pod.Labels[CompletionIndexKey] = idx
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", s.job.Name, index)
	}
	env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + CompletionIndexKey + "']"}}}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Env = append(pod.Spec.Containers[i].Env, env)
	}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].Env = append(pod.Spec.InitContainers[i].Env, env)
	}
	return pod
}

package job

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/util/controllertest"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func newJob(parallelism, completions int32) *batchv1.Job {
	labels := map[string]string{"batch.kubernetes.io/controller-uid": "uid-pi", "batch.kubernetes.io/job-name": "pi"}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: "uid-pi"},
		Spec: batchv1.JobSpec{
			Parallelism:  &parallelism,
			Completions:  &completions,
			BackoffLimit: ptr(int32(6)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "pi", Image: "perl"}}},
			},
		},
	}
}

// world is a fake apiserver with running informers; the test plays the kubelet by
// setting pod phases and calls the controller's Sync directly once the cache caught up.
type world struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

func newWorld(t *testing.T, objs ...runtime.Object) *world {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	controllertest.GenerateNames(client)
	f := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(t0)
	w := &world{t: t, ctx: ctx, client: client, f: f, c: New(client, f, clk), clock: clk, events: record.NewFakeRecorder(1000)}
	w.c.recorder = w.events
	controllertest.StartInformers(t, ctx, f)
	return w
}

func (w *world) pods() []*corev1.Pod {
	list, err := w.client.CoreV1().Pods("default").List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (w *world) job() *batchv1.Job {
	j, err := w.client.BatchV1().Jobs("default").Get(w.ctx, "pi", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

// sync waits for the informers to show what the apiserver holds, then syncs the Job.
func (w *world) sync() error {
	w.t.Helper()
	controllertest.WaitForCache(w.t, w.f.Core().V1().Pods().Informer().GetStore(), func() []any {
		var out []any
		for _, p := range w.pods() {
			out = append(out, p)
		}
		return out
	})
	controllertest.WaitForCache(w.t, w.f.Batch().V1().Jobs().Informer().GetStore(), func() []any {
		list, _ := w.client.BatchV1().Jobs("default").List(w.ctx, metav1.ListOptions{})
		var out []any
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	})
	w.client.ClearActions()
	return w.c.Sync(w.ctx, "default/pi")
}

func (w *world) mustSync() {
	w.t.Helper()
	if err := w.sync(); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

// finish plays the kubelet: the named pod's containers exit with code.
func (w *world) finish(p *corev1.Pod, code int32) {
	w.t.Helper()
	p.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "pi", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(w.clock.Now())}}}}
	if _, err := w.client.CoreV1().Pods("default").UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func running(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !util.IsPodTerminal(p) {
			out = append(out, p)
		}
	}
	return out
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func TestParallelismThreeCompletionsSix(t *testing.T) {
	w := newWorld(t, newJob(3, 6))
	w.mustSync()
	pods := w.pods()
	if len(pods) != 3 {
		t.Fatalf("created %d pods, want parallelism 3", len(pods))
	}
	for _, p := range pods {
		if !util.IsControlledBy(p, w.job()) || !hasFinalizer(p) || p.GenerateName != "pi-" {
			t.Errorf("pod %s: owner %v finalizers %v generateName %q", p.Name, p.OwnerReferences, p.Finalizers, p.GenerateName)
		}
	}
	if w.job().Status.StartTime == nil {
		t.Error("startTime not set")
	}
	// The kubelet finishes pods two at a time; the controller keeps 3 running until the
	// remaining completions are fewer.
	for round := 0; round < 10 && jobCondition(w.job(), batchv1.JobComplete) == nil; round++ {
		run := running(w.pods())
		if len(run) > 3 {
			t.Fatalf("round %d: %d pods running, above parallelism", round, len(run))
		}
		for i, p := range run {
			if i < 2 {
				w.finish(p, 0)
			}
		}
		w.mustSync()
		w.mustSync() // a second pass is idempotent and lets the status settle
	}
	j := w.job()
	if c := jobCondition(j, batchv1.JobComplete); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonCompletionsReached {
		t.Fatalf("Complete = %+v; status %+v", c, j.Status)
	}
	if c := jobCondition(j, batchv1.JobSuccessCriteriaMet); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("SuccessCriteriaMet = %+v", c)
	}
	if j.Status.Succeeded != 6 || j.Status.Failed != 0 || j.Status.Active != 0 || j.Status.CompletionTime == nil {
		t.Errorf("status %+v, want succeeded 6, active 0, completionTime set", j.Status)
	}
	pods = w.pods()
	if len(pods) != 6 {
		t.Errorf("%d pods were created in all, want exactly 6", len(pods))
	}
	for _, p := range pods {
		if hasFinalizer(p) {
			t.Errorf("pod %s still carries the tracking finalizer", p.Name)
		}
	}
	if u := j.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) != 0 {
		t.Errorf("uncounted pods left: %+v", u)
	}
	var created, completed int
	for len(w.events.Events) > 0 {
		switch e := <-w.events.Events; {
		case strings.HasPrefix(e, "Normal SuccessfulCreate Created pod: pi-"):
			created++
		case e == "Normal Completed Job completed":
			completed++
		}
	}
	if created != 6 || completed != 1 {
		t.Errorf("events: %d SuccessfulCreate, %d Completed; want 6 and 1", created, completed)
	}
}

func TestBackoffLimitFailsTheJob(t *testing.T) {
	j := newJob(1, 1)
	j.Spec.BackoffLimit = ptr(int32(1))
	w := newWorld(t, j)
	w.mustSync()
	w.finish(w.pods()[0], 1)
	w.mustSync()
	if got := w.job().Status.Failed; got != 1 {
		t.Fatalf("failed = %d, want 1", got)
	}
	if n := len(running(w.pods())); n != 0 {
		t.Fatalf("replacement created at once; want a 10s back-off")
	}
	w.clock.Step(5 * time.Second)
	w.mustSync()
	if n := len(running(w.pods())); n != 0 {
		t.Fatalf("replacement created after 5s of a 10s back-off")
	}
	w.clock.Step(6 * time.Second)
	w.mustSync()
	run := running(w.pods())
	if len(run) != 1 {
		t.Fatalf("%d pods running after the back-off, want 1 replacement", len(run))
	}
	w.finish(run[0], 1)
	w.mustSync()
	w.mustSync()
	got := w.job()
	c := jobCondition(got, batchv1.JobFailed)
	if c == nil || c.Reason != ReasonBackoffLimitExceeded || c.Message != "Job has reached the specified backoff limit" {
		t.Fatalf("Failed = %+v, status %+v", c, got.Status)
	}
	if ft := jobCondition(got, batchv1.JobFailureTarget); ft == nil || ft.Reason != ReasonBackoffLimitExceeded {
		t.Errorf("FailureTarget = %+v", ft)
	}
	if got.Status.Failed != 2 || got.Status.CompletionTime != nil {
		t.Errorf("status %+v, want failed 2 and no completionTime", got.Status)
	}
}

func TestBackoffDoublesAndCaps(t *testing.T) {
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {6, 320 * time.Second}, {7, 6 * time.Minute}, {20, 6 * time.Minute}} {
		s := &jobSync{now: t0, job: newJob(1, 1)}
		for i := range tt.failures {
			s.pods = append(s.pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i))},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(t0)}}}}}})
		}
		if got := s.backoffRemaining(); got != tt.want {
			t.Errorf("%d failures: back-off %v, want %v", tt.failures, got, tt.want)
		}
	}
}

func TestIndexedJob(t *testing.T) {
	j := newJob(2, 3)
	j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	w := newWorld(t, j)
	w.mustSync()
	pods := w.pods()
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	byIndex := map[string]*corev1.Pod{}
	for _, p := range pods {
		idx := p.Annotations[CompletionIndexKey]
		byIndex[idx] = p
		if p.Labels[CompletionIndexKey] != idx || p.Spec.Hostname != "pi-"+idx || !strings.HasPrefix(p.Name, "pi-"+idx+"-") {
			t.Errorf("pod %s: index label %q hostname %q", p.Name, p.Labels[CompletionIndexKey], p.Spec.Hostname)
		}
		if env := p.Spec.Containers[0].Env; len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" {
			t.Errorf("pod %s env %v", p.Name, env)
		}
	}
	if byIndex["0"] == nil || byIndex["1"] == nil {
		t.Fatalf("indexes %v, want 0 and 1", byIndex)
	}
	w.finish(byIndex["1"], 0)
	w.mustSync()
	if got := w.job().Status.CompletedIndexes; got != "1" {
		t.Errorf("completedIndexes %q, want 1", got)
	}
	var idx []string
	for _, p := range running(w.pods()) {
		idx = append(idx, p.Annotations[CompletionIndexKey])
	}
	slices.Sort(idx)
	if !slices.Equal(idx, []string{"0", "2"}) {
		t.Errorf("running indexes %v, want 0 and 2", idx)
	}
	for _, p := range running(w.pods()) {
		w.finish(p, 0)
	}
	w.mustSync()
	w.mustSync()
	got := w.job()
	if got.Status.CompletedIndexes != "0-2" || jobCondition(got, batchv1.JobComplete) == nil {
		t.Errorf("status %+v, want completedIndexes 0-2 and Complete", got.Status)
	}
}

func TestActiveDeadlineExceeded(t *testing.T) {
	j := newJob(2, 4)
	j.Spec.ActiveDeadlineSeconds = ptr(int64(60))
	w := newWorld(t, j)
	w.mustSync()
	w.clock.Step(61 * time.Second)
	w.mustSync()
	got := w.job()
	if c := jobCondition(got, batchv1.JobFailureTarget); c == nil || c.Reason != ReasonDeadlineExceeded {
		t.Fatalf("FailureTarget = %+v", c)
	}
	if n := len(w.pods()); n != 0 {
		t.Errorf("%d pods left, want the active ones deleted", n)
	}
	w.mustSync()
	got = w.job()
	if c := jobCondition(got, batchv1.JobFailed); c == nil || c.Reason != ReasonDeadlineExceeded || c.Message != "Job was active longer than specified deadline" {
		t.Errorf("Failed = %+v", c)
	}
	if got.Status.Failed != 0 {
		t.Errorf("failed = %d; pods stopped by the deadline are not failures", got.Status.Failed)
	}
}

func TestPodFailurePolicy(t *testing.T) {
	policy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{143}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr("pi"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
	}}
	j := newJob(1, 1)
	j.Spec.PodFailurePolicy = policy
	w := newWorld(t, j)
	w.mustSync()
	w.finish(w.pods()[0], 143)
	w.mustSync()
	if got := w.job().Status.Failed; got != 0 {
		t.Errorf("an ignored failure was counted: failed = %d", got)
	}
	if n := len(running(w.pods())); n != 1 {
		t.Fatalf("%d running after an ignored failure, want an immediate replacement", n)
	}
	w.finish(running(w.pods())[0], 42)
	w.mustSync()
	w.mustSync()
	c := jobCondition(w.job(), batchv1.JobFailed)
	if c == nil || c.Reason != ReasonPodFailurePolicy || !strings.Contains(c.Message, "failed with exit code 42 matching FailJob rule at index 1") {
		t.Errorf("Failed = %+v", c)
	}
}

func TestSuspendAndResume(t *testing.T) {
	w := newWorld(t, newJob(2, 2))
	w.mustSync()
	j := w.job()
	j.Spec.Suspend = ptr(true)
	if _, err := w.client.BatchV1().Jobs("default").Update(w.ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.mustSync()
	got := w.job()
	if n := len(w.pods()); n != 0 {
		t.Errorf("%d pods left on a suspended job", n)
	}
	if c := jobCondition(got, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonSuspended {
		t.Errorf("Suspended = %+v", c)
	}
	if got.Status.Failed != 0 || got.Status.Active != 0 {
		t.Errorf("status %+v; suspension is not failure", got.Status)
	}
	got.Spec.Suspend = ptr(false)
	if _, err := w.client.BatchV1().Jobs("default").Update(w.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(time.Minute)
	w.mustSync()
	got = w.job()
	if c := jobCondition(got, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonResumed {
		t.Errorf("Suspended = %+v after resume", c)
	}
	if n := len(w.pods()); n != 2 {
		t.Errorf("%d pods after resume, want 2", n)
	}
	if !got.Status.StartTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("startTime %v, want reset to the resume time", got.Status.StartTime)
	}
}

func TestOrphanedPodLosesItsFinalizer(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-x", Namespace: "default", UID: "uid-x",
		Finalizers:      []string{batchv1.JobTrackingFinalizer},
		OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(newJob(1, 1), jobGVK)}}}
	w := newWorld(t, pod)
	w.client.ClearActions()
	if err := w.c.Sync(w.ctx, orphanPrefix+"default/pi-x"); err != nil {
		t.Fatal(err)
	}
	got, _ := w.client.CoreV1().Pods("default").Get(w.ctx, "pi-x", metav1.GetOptions{})
	if hasFinalizer(got) {
		t.Errorf("finalizers %v, want the job-tracking finalizer removed (its Job is gone)", got.Finalizers)
	}
}

func TestCompletedIndexesFormat(t *testing.T) {
	set := map[int]bool{1: true, 3: true, 4: true, 5: true, 7: true}
	if got := formatIndexes(set); got != "1,3-5,7" {
		t.Errorf("format %q", got)
	}
	if got := parseIndexes("1,3-5,7", 10); len(got) != 5 || !got[4] || got[6] {
		t.Errorf("parse %v", got)
	}
}

func TestJobManagedElsewhereIsLeftAlone(t *testing.T) {
	j := newJob(2, 2)
	j.Spec.ManagedBy = ptr("example.com/multikueue")
	w := newWorld(t, j)
	w.mustSync()
	if n := len(w.pods()); n != 0 {
		t.Errorf("created %d pods for a Job managed by another controller", n)
	}
}

func TestSuccessPolicyEndsAnIndexedJobEarly(t *testing.T) {
	j := newJob(3, 3)
	j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
		{SucceededIndexes: ptr("0-2"), SucceededCount: ptr(int32(3))},
		{SucceededIndexes: ptr("0")}, // the leader finishing is enough
	}}
	w := newWorld(t, j)
	w.mustSync()
	for _, p := range w.pods() {
		if p.Annotations[CompletionIndexKey] == "0" {
			w.finish(p, 0)
		}
	}
	w.mustSync()
	got := w.job()
	if c := jobCondition(got, batchv1.JobSuccessCriteriaMet); c == nil || c.Reason != batchv1.JobReasonSuccessPolicy || c.Message != "Matched rules at index 1" {
		t.Fatalf("SuccessCriteriaMet = %+v", c)
	}
	if n := len(running(w.pods())); n != 0 {
		t.Errorf("%d pods still running after the success policy matched", n)
	}
	w.mustSync()
	if c := jobCondition(w.job(), batchv1.JobComplete); c == nil || c.Reason != batchv1.JobReasonSuccessPolicy {
		t.Errorf("Complete = %+v", c)
	}
	if w.job().Status.Failed != 0 {
		t.Errorf("failed = %d; pods stopped after success are not failures", w.job().Status.Failed)
	}
}

func TestBackoffLimitPerIndex(t *testing.T) {
	j := newJob(2, 2)
	j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	j.Spec.BackoffLimitPerIndex = ptr(int32(1))
	w := newWorld(t, j)
	w.mustSync()
	index := func(i string) *corev1.Pod {
		for _, p := range running(w.pods()) {
			if p.Annotations[CompletionIndexKey] == i {
				return p
			}
		}
		t.Fatalf("no running pod for index %s", i)
		return nil
	}
	w.finish(index("1"), 0)
	w.finish(index("0"), 1)
	w.mustSync()
	w.clock.Step(time.Minute) // past the back-off
	w.mustSync()
	retry := index("0")
	if got := retry.Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "1" {
		t.Errorf("retry of index 0 carries failure count %q, want 1", got)
	}
	w.finish(retry, 1) // second failure: beyond backoffLimitPerIndex 1
	w.mustSync()
	w.mustSync()
	got := w.job()
	if got.Status.FailedIndexes == nil || *got.Status.FailedIndexes != "0" || got.Status.CompletedIndexes != "1" {
		t.Errorf("failedIndexes %v completedIndexes %q, want 0 and 1", got.Status.FailedIndexes, got.Status.CompletedIndexes)
	}
	if c := jobCondition(got, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonFailedIndexes {
		t.Errorf("Failed = %+v, want reason FailedIndexes", c)
	}
}

func TestPodReplacementPolicy(t *testing.T) {
	for _, tt := range []struct {
		policy          batchv1.PodReplacementPolicy
		wantReplacement bool
		wantFailed      int32
	}{
		{batchv1.TerminatingOrFailed, true, 1},
		{batchv1.Failed, false, 0},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			j := newJob(1, 1)
			j.Spec.PodReplacementPolicy = ptr(tt.policy)
			w := newWorld(t, j)
			w.mustSync()
			// The pod is being deleted (say, preempted) but its container still runs.
			p := w.pods()[0]
			now := metav1.NewTime(t0)
			p.DeletionTimestamp = &now
			p.Status.Phase = corev1.PodRunning
			if _, err := w.client.CoreV1().Pods("default").Update(w.ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			w.clock.Step(time.Minute)
			w.mustSync()
			w.mustSync()
			replaced := 0
			for _, q := range w.pods() {
				if q.DeletionTimestamp == nil {
					replaced++
				}
			}
			if (replaced == 1) != tt.wantReplacement || w.job().Status.Failed != tt.wantFailed {
				t.Errorf("replacements %d, failed %d; want replacement=%v failed=%d", replaced, w.job().Status.Failed, tt.wantReplacement, tt.wantFailed)
			}
			if tt.policy == batchv1.Failed {
				if got := w.job().Status.Terminating; got == nil || *got != 1 {
					t.Errorf("terminating %v, want 1", got)
				}
			}
		})
	}
}

// queued drains the controller's queue and returns what it held.
func queued(c *Controller) map[string]bool {
	out := map[string]bool{}
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		out[key] = true
		c.queue.Done(key)
		c.queue.Forget(key)
	}
	return out
}

// TestOrphanedPodIsOfferedToMatchingJobs: a pod whose controllerRef is removed, or an
// orphan whose labels change, enqueues the Jobs whose selector matches it so that they
// adopt it, as upstream's ("should adopt matching orphans and release non-matching
// pods"); then its adoption by the Job's sync.
func TestOrphanedPodIsOfferedToMatchingJobs(t *testing.T) {
	job := newJob(2, 4)
	owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-x", Namespace: "default", UID: "uid-x",
		Labels:          job.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(job, jobGVK)}}}
	orphan := owned.DeepCopy()
	orphan.OwnerReferences = nil
	// The pod is not in the apiserver yet, so no informer event of its own interferes.
	w := newWorld(t, job)
	controllertest.WaitForCache(t, w.f.Batch().V1().Jobs().Informer().GetStore(), func() []any { return []any{job} })
	queued(w.c)

	w.c.podEvent(owned, orphan, false)
	if got := queued(w.c); !got["default/pi"] {
		t.Errorf("orphaning a pod queued %v, want default/pi", got)
	}
	other := orphan.DeepCopy()
	other.Labels = map[string]string{"app": "other"}
	w.c.podEvent(other, orphan, false)
	if got := queued(w.c); !got["default/pi"] {
		t.Errorf("an orphan taking matching labels queued %v, want default/pi", got)
	}
	w.c.podEvent(orphan, other, false)
	if got := queued(w.c); got["default/pi"] {
		t.Errorf("an orphan with labels no Job selects queued %v", got)
	}

	if _, err := w.client.CoreV1().Pods("default").Create(w.ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.mustSync()
	got, err := w.client.CoreV1().Pods("default").Get(w.ctx, "pi-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != job.UID {
		t.Errorf("after the Job's sync the orphan's controller is %v, want the Job", ref)
	}
}

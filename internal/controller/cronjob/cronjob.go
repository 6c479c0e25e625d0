// Package cronjob creates a CronJob's Jobs on its schedule (standard five-field cron or
// a predefined @hourly-style schedule, in the CronJob's timeZone), applies the
// concurrency policy, startingDeadlineSeconds and suspend, tracks status.active,
// lastScheduleTime and lastSuccessfulTime, and deletes finished Jobs beyond the history
// limits. Jobs are named <cronjob>-<scheduled time in minutes since the epoch>.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
	_ "time/tzdata" // timeZone must work on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// ScheduledTimestampAnnotation records on each Job the time it was scheduled for.
const ScheduledTimestampAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// maxScheduleSteps bounds the walk over missed schedule times (about 69 days of an
// every-minute schedule), so a long-dead CronJob cannot stall a worker.
const maxScheduleSteps = 100000

var cronJobGVK = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller is the cronjob controller.
type Controller struct {
	client   kubernetes.Interface
	cronJobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	clock    clock.Clock
	events   *util.Events
	recorder record.EventRecorder
}

// New returns the cronjob controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	cjInf, jobInf := f.Batch().V1().CronJobs(), f.Batch().V1().Jobs()
	c := &Controller{
		client:   client,
		cronJobs: cjInf.Lister(),
		jobs:     jobInf.Lister(),
		synced:   []cache.InformerSynced{cjInf.Informer().HasSynced, jobInf.Informer().HasSynced},
		queue:    util.NewQueue("cronjob"),
		clock:    clk,
		events:   util.NewEvents(client, "cronjob-controller"),
	}
	c.recorder = c.events
	cjInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
		DeleteFunc: func(obj any) { util.Enqueue(c.queue, obj) },
	})
	enqueueOwner := func(obj any) {
		job, ok := obj.(*batchv1.Job)
		if !ok {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				job, _ = tomb.Obj.(*batchv1.Job)
			}
		}
		if job == nil {
			return
		}
		if ref := metav1.GetControllerOf(job); ref != nil && ref.Kind == cronJobGVK.Kind {
			c.queue.Add(job.Namespace + "/" + ref.Name)
		}
	}
	jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueOwner,
		UpdateFunc: func(_, obj any) { enqueueOwner(obj) },
		DeleteFunc: enqueueOwner,
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "cronjob", c.queue, workers, c.Sync, c.synced...)
}

// JobName is the name of the Job that cj runs for scheduledTime.
func JobName(cj *batchv1.CronJob, scheduledTime time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduledTime.Unix()/60)
}

func jobFinished(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// Sync reconciles the CronJob named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.cronJobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	cj := cached.DeepCopy()
	all, err := c.jobs.Jobs(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var jobs []*batchv1.Job
	for _, j := range all {
		if util.IsControlledBy(j, cj) {
			jobs = append(jobs, j)
		}
	}
	now := c.clock.Now()
	log := slog.With("controller", "cronjob", "cronjob", key)

	c.reconcileActive(ctx, cj, jobs)
	var errs []error
	requeue, err := c.schedule(ctx, cj, now, log)
	if err != nil {
		errs = append(errs, err)
	}
	if !apiequality.Semantic.DeepEqual(cj.Status, cached.Status) {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.cleanupHistory(ctx, cj, jobs); err != nil {
		errs = append(errs, err)
	}
	if requeue > 0 {
		c.queue.AddAfter(key, requeue)
	}
	return errors.Join(errs...)
}

// reconcileActive makes status.active list exactly the unfinished Jobs cj owns, and
// moves lastSuccessfulTime forward for those that completed.
func (c *Controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) {
	wasActive := map[types.UID]bool{}
	for _, ref := range cj.Status.Active {
		wasActive[ref.UID] = true
	}
	var active []corev1.ObjectReference
	for _, j := range jobs {
		done, cond := jobFinished(j)
		if !done {
			active = append(active, jobRef(j))
			continue
		}
		if wasActive[j.UID] {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
		}
		if cond == batchv1.JobComplete && j.Status.CompletionTime != nil &&
			(cj.Status.LastSuccessfulTime == nil || cj.Status.LastSuccessfulTime.Before(j.Status.CompletionTime)) {
			t := *j.Status.CompletionTime
			cj.Status.LastSuccessfulTime = &t
		}
	}
	// A Job created a moment ago may not be in the cache yet: ask the apiserver before
	// dropping it from the list.
	present := map[string]bool{}
	for _, j := range jobs {
		present[j.Name] = true
	}
	for _, ref := range cj.Status.Active {
		if present[ref.Name] {
			continue
		}
		j, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			active = append(active, ref)
		case util.IsControlledBy(j, cj):
			if done, _ := jobFinished(j); !done {
				active = append(active, ref)
			}
		}
	}
	sort.Slice(active, func(i, k int) bool { return active[i].Name < active[k].Name })
	if len(active) == 0 {
		active = nil
	}
	cj.Status.Active = active
}

func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name,
		UID: j.UID, ResourceVersion: j.ResourceVersion}
}

// schedule starts the Job for the most recent missed schedule time, if any and if
// allowed, and returns when to look again.
func (c *Controller) schedule(ctx context.Context, cj *batchv1.CronJob, now time.Time, log *slog.Logger) (time.Duration, error) {
	if cj.DeletionTimestamp != nil {
		return 0, nil
	}
	loc := time.Local
	if cj.Spec.TimeZone != nil {
		var err error
		if loc, err = time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			log.Info("unknown time zone, not scheduling", "timeZone", *cj.Spec.TimeZone)
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *cj.Spec.TimeZone, err)
			return 0, nil
		}
	}
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		log.Info("unparseable schedule, not scheduling", "schedule", cj.Spec.Schedule, "err", err)
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, nil
	}
	now = now.In(loc)
	next := sched.Next(now).Sub(now) + 100*time.Millisecond
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return 0, nil
	}
	scheduled, missed := mostRecentScheduleTime(cj, now, sched)
	if scheduled == nil {
		return next, nil
	}
	if missed > 100 {
		log.Info("too many missed start times; check clock skew or startingDeadlineSeconds", "missed", missed)
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		log.Info("missed the starting deadline", "scheduledTime", scheduled)
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next, nil
	}
	name := JobName(cj, *scheduled)
	for _, ref := range cj.Status.Active {
		if ref.Name == name {
			return next, nil
		}
	}
	if cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduled) {
		return next, nil
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			// The missed time stays due: it runs when the active Job ends, if still
			// within startingDeadlineSeconds.
			log.Info("not starting a job: the previous one still runs and the policy is Forbid")
			c.recorder.Event(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next, nil
		}
	case batchv1.ReplaceConcurrent:
		background := metav1.DeletePropagationBackground
		for _, ref := range cj.Status.Active {
			err := c.client.BatchV1().Jobs(cj.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", ref.Name)
		}
		cj.Status.Active = nil
	}
	job := newJob(cj, *scheduled, loc)
	created, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier sync whose status write was lost.
		if created, err = c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); err == nil && !util.IsControlledBy(created, cj) {
			return next, fmt.Errorf("job %s exists and is not controlled by cronjob %s", job.Name, cj.Name)
		}
	}
	if err != nil {
		return 0, err
	}
	log.Info("created job", "job", created.Name, "scheduledTime", scheduled)
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	if done, _ := jobFinished(created); !done {
		cj.Status.Active = append(cj.Status.Active, jobRef(created))
	}
	t := metav1.NewTime(*scheduled)
	cj.Status.LastScheduleTime = &t
	return next, nil
}

// mostRecentScheduleTime returns the latest schedule time in (earliest, now], where
// earliest is the last schedule time (or creation), but no earlier than
// startingDeadlineSeconds ago, with the number of schedule times in that window.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	earliest = earliest.In(now.Location())
	t := sched.Next(earliest)
	if t.After(now) || t.IsZero() {
		return nil, 0
	}
	missed := 1
	for i := 0; i < maxScheduleSteps; i++ {
		n := sched.Next(t)
		if n.After(now) || n.IsZero() {
			break
		}
		t = n
		missed++
	}
	return &t, missed
}

func newJob(cj *batchv1.CronJob, scheduled time.Time, loc *time.Location) *batchv1.Job {
	tpl := cj.Spec.JobTemplate.DeepCopy()
	annotations := tpl.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          tpl.Labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(cj, cronJobGVK)},
		},
		Spec: tpl.Spec,
	}
}

// cleanupHistory deletes the oldest finished Jobs beyond the success and failure
// history limits.
func (c *Controller) cleanupHistory(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) error {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch _, cond := jobFinished(j); cond {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	var errs []error
	for _, group := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{succeeded, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if group.limit == nil || len(group.jobs) <= int(*group.limit) {
			continue
		}
		sort.Slice(group.jobs, func(i, k int) bool { return startedBefore(group.jobs[i], group.jobs[k]) })
		background := metav1.DeletePropagationBackground
		for _, j := range group.jobs[:len(group.jobs)-int(*group.limit)] {
			err := c.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
		}
	}
	return errors.Join(errs...)
}

func startedBefore(a, b *batchv1.Job) bool {
	ta, tb := a.Status.StartTime, b.Status.StartTime
	switch {
	case ta == nil && tb == nil:
		return a.Name < b.Name
	case ta == nil:
		return true
	case tb == nil:
		return false
	case ta.Equal(tb):
		return a.Name < b.Name
	}
	return ta.Before(tb)
}

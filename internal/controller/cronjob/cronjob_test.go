package cronjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
)

// t0 is a Monday, 12:00 UTC.
var t0 = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func newCronJob(schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "default", UID: "uid-report",
			CreationTimestamp: metav1.NewTime(t0.Add(-48 * time.Hour))},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "report"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "r", Image: "busybox"}}}}},
			},
		},
	}
}

func jobOf(cj *batchv1.CronJob, scheduled time.Time, finished batchv1.JobConditionType) *batchv1.Job {
	j := newJob(cj, scheduled, time.UTC)
	j.UID = types.UID("uid-job-" + j.Name)
	j.Status.StartTime = ptr(metav1.NewTime(scheduled))
	if finished != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: finished, Status: corev1.ConditionTrue}}
		j.Status.CompletionTime = ptr(metav1.NewTime(scheduled.Add(time.Minute)))
	}
	return j
}

type fixture struct {
	t      *testing.T
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

func newFixture(t *testing.T, now time.Time, objs ...runtime.Object) *fixture {
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(now)
	fx := &fixture{t: t, client: client, f: f, c: New(client, f, clk), clock: clk, events: record.NewFakeRecorder(1000)}
	fx.c.recorder = fx.events
	return fx
}

// sync shows the controller what the fake apiserver holds and syncs the CronJob.
func (fx *fixture) sync() {
	fx.t.Helper()
	ctx := context.Background()
	cjs, _ := fx.client.BatchV1().CronJobs("").List(ctx, metav1.ListOptions{})
	jobs, _ := fx.client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	var a, b []any
	for i := range cjs.Items {
		a = append(a, &cjs.Items[i])
	}
	for i := range jobs.Items {
		b = append(b, &jobs.Items[i])
	}
	fx.f.Batch().V1().CronJobs().Informer().GetIndexer().Replace(a, "")
	fx.f.Batch().V1().Jobs().Informer().GetIndexer().Replace(b, "")
	fx.client.ClearActions()
	if err := fx.c.Sync(ctx, "default/report"); err != nil {
		fx.t.Fatalf("sync: %v", err)
	}
}

func (fx *fixture) cronJob() *batchv1.CronJob {
	cj, err := fx.client.BatchV1().CronJobs("default").Get(context.Background(), "report", metav1.GetOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return cj
}

func (fx *fixture) jobNames() []string {
	jobs, _ := fx.client.BatchV1().Jobs("default").List(context.Background(), metav1.ListOptions{})
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	return names
}

func (fx *fixture) created() []string {
	var names []string
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
			names = append(names, a.(clienttesting.CreateAction).GetObject().(*batchv1.Job).Name)
		}
	}
	return names
}

func (fx *fixture) deleted() []string {
	var names []string
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "jobs" {
			names = append(names, a.(clienttesting.DeleteAction).GetName())
		}
	}
	slices.Sort(names)
	return names
}

func name(at time.Time) string { return fmt.Sprintf("report-%d", at.Unix()/60) }

func TestSchedulesTheMostRecentMissedTime(t *testing.T) {
	for _, tt := range []struct {
		schedule string
		tz       *string
		now      time.Time
		want     time.Time // zero: no job
	}{
		{"*/5 * * * *", nil, t0.Add(30 * time.Second), t0},
		{"*/5 * * * *", nil, t0.Add(4 * time.Minute), t0},
		{"*/5 * * * *", nil, t0.Add(-time.Second), t0.Add(-5 * time.Minute)},
		{"@hourly", nil, t0.Add(59 * time.Minute), t0},
		{"@daily", nil, t0, t0.Add(-12 * time.Hour)},
		{"@weekly", nil, t0, t0.Add(-36 * time.Hour)}, // Sunday midnight
		{"0 21 * * *", ptr("Asia/Tokyo"), t0.Add(-time.Minute), time.Date(2026, 1, 4, 12, 0, 0, 0, time.UTC)},
		{"0 21 * * *", ptr("Asia/Tokyo"), t0.Add(time.Minute), time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)},
	} {
		t.Run(fmt.Sprintf("%s@%s", tt.schedule, tt.now.Format(time.TimeOnly)), func(t *testing.T) {
			cj := newCronJob(tt.schedule)
			cj.Spec.TimeZone = tt.tz
			fx := newFixture(t, tt.now, cj)
			fx.sync()
			if got := fx.created(); !slices.Equal(got, []string{name(tt.want)}) {
				t.Fatalf("created %v, want %s (scheduled %v)", got, name(tt.want), tt.want)
			}
			got := fx.cronJob()
			if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(tt.want) {
				t.Errorf("lastScheduleTime %v, want %v", got.Status.LastScheduleTime, tt.want)
			}
			if len(got.Status.Active) != 1 || got.Status.Active[0].Name != name(tt.want) || got.Status.Active[0].Kind != "Job" {
				t.Errorf("active %+v", got.Status.Active)
			}
			job, _ := fx.client.BatchV1().Jobs("default").Get(context.Background(), name(tt.want), metav1.GetOptions{})
			if !util.IsControlledBy(job, cj) || job.Labels["app"] != "report" || job.Annotations[ScheduledTimestampAnnotation] == "" {
				t.Errorf("job %s: owners %v labels %v annotations %v", job.Name, job.OwnerReferences, job.Labels, job.Annotations)
			}
			// Syncing again at the same moment starts nothing more.
			fx.sync()
			if got := fx.created(); len(got) != 0 {
				t.Errorf("second sync created %v", got)
			}
		})
	}
}

func TestClockAdvancesThroughSchedules(t *testing.T) {
	cj := newCronJob("*/5 * * * *")
	cj.Status.LastScheduleTime = ptr(metav1.NewTime(t0.Add(-5 * time.Minute)))
	fx := newFixture(t, t0.Add(-time.Minute), cj)
	fx.sync()
	if got := fx.created(); len(got) != 0 {
		t.Fatalf("created %v before the next schedule time", got)
	}
	for i := 0; i < 3; i++ {
		fx.clock.Step(5 * time.Minute)
		fx.sync()
	}
	want := []string{name(t0), name(t0.Add(5 * time.Minute)), name(t0.Add(10 * time.Minute))}
	if got := fx.jobNames(); !slices.Equal(got, want) {
		t.Errorf("jobs %v, want %v", got, want)
	}
}

func TestConcurrencyPolicy(t *testing.T) {
	for _, tt := range []struct {
		policy      batchv1.ConcurrencyPolicy
		wantCreated []string
		wantDeleted []string
	}{
		{batchv1.AllowConcurrent, []string{name(t0)}, nil},
		{batchv1.ForbidConcurrent, nil, nil},
		{batchv1.ReplaceConcurrent, []string{name(t0)}, []string{name(t0.Add(-5 * time.Minute))}},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			cj := newCronJob("*/5 * * * *")
			cj.Spec.ConcurrencyPolicy = tt.policy
			running := jobOf(cj, t0.Add(-5*time.Minute), "")
			cj.Status.LastScheduleTime = ptr(metav1.NewTime(t0.Add(-5 * time.Minute)))
			cj.Status.Active = []corev1.ObjectReference{jobRef(running)}
			fx := newFixture(t, t0.Add(10*time.Second), cj, running)
			fx.sync()
			if got := fx.created(); !slices.Equal(got, tt.wantCreated) {
				t.Errorf("created %v, want %v", got, tt.wantCreated)
			}
			if got := fx.deleted(); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", got, tt.wantDeleted)
			}
		})
	}
}

func TestForbidRunsTheMissedTimeWhenThePreviousJobEnds(t *testing.T) {
	cj := newCronJob("*/5 * * * *")
	cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	running := jobOf(cj, t0.Add(-5*time.Minute), "")
	cj.Status.LastScheduleTime = ptr(metav1.NewTime(t0.Add(-5 * time.Minute)))
	cj.Status.Active = []corev1.ObjectReference{jobRef(running)}
	fx := newFixture(t, t0.Add(time.Minute), cj, running)
	fx.sync()
	running.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	running.Status.CompletionTime = ptr(metav1.NewTime(t0.Add(90 * time.Second)))
	if _, err := fx.client.BatchV1().Jobs("default").UpdateStatus(context.Background(), running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.clock.Step(time.Minute)
	fx.sync()
	if got := fx.created(); !slices.Equal(got, []string{name(t0)}) {
		t.Errorf("created %v, want the 12:00 job once the 11:55 one completed", got)
	}
	got := fx.cronJob()
	if got.Status.LastSuccessfulTime == nil || !got.Status.LastSuccessfulTime.Time.Equal(t0.Add(90*time.Second)) {
		t.Errorf("lastSuccessfulTime %v", got.Status.LastSuccessfulTime)
	}
	if len(got.Status.Active) != 1 || got.Status.Active[0].Name != name(t0) {
		t.Errorf("active %+v, want only the new job", got.Status.Active)
	}
}

func TestStartingDeadlineAndSuspend(t *testing.T) {
	late := newCronJob("*/5 * * * *")
	late.Spec.StartingDeadlineSeconds = ptr(int64(60))
	fx := newFixture(t, t0.Add(2*time.Minute), late)
	fx.sync()
	if got := fx.created(); len(got) != 0 {
		t.Errorf("created %v two minutes late with a 60s starting deadline", got)
	}
	suspended := newCronJob("*/5 * * * *")
	suspended.Spec.Suspend = ptr(true)
	fx = newFixture(t, t0.Add(time.Second), suspended)
	fx.sync()
	if got := fx.created(); len(got) != 0 {
		t.Errorf("suspended cron job created %v", got)
	}
}

func TestHistoryLimits(t *testing.T) {
	cj := newCronJob("@hourly")
	cj.Spec.SuccessfulJobsHistoryLimit = ptr(int32(1))
	cj.Spec.FailedJobsHistoryLimit = ptr(int32(0))
	cj.Status.LastScheduleTime = ptr(metav1.NewTime(t0))
	objs := []runtime.Object{cj}
	for h := 1; h <= 3; h++ {
		objs = append(objs, jobOf(cj, t0.Add(-time.Duration(h)*time.Hour), batchv1.JobComplete))
	}
	objs = append(objs, jobOf(cj, t0.Add(-4*time.Hour), batchv1.JobFailed))
	fx := newFixture(t, t0.Add(time.Minute), objs...)
	fx.sync()
	want := []string{name(t0.Add(-4 * time.Hour)), name(t0.Add(-3 * time.Hour)), name(t0.Add(-2 * time.Hour))}
	slices.Sort(want)
	if got := fx.deleted(); !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v (keep the newest success, no failures)", got, want)
	}
	if got := fx.cronJob().Status.LastSuccessfulTime; got == nil || !got.Time.Equal(t0.Add(-time.Hour+time.Minute)) {
		t.Errorf("lastSuccessfulTime %v", got)
	}
	deletes := 0
	for len(fx.events.Events) > 0 {
		if e := <-fx.events.Events; strings.HasPrefix(e, "Normal SuccessfulDelete Deleted job report-") {
			deletes++
		}
	}
	if deletes != 3 {
		t.Errorf("%d SuccessfulDelete events, want 3", deletes)
	}
}

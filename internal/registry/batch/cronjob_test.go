package batch

import (
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newCronJob() *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "c1"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: piTemplate()}},
		},
	}
}

func TestCronJobDefaults(t *testing.T) {
	cj := newCronJob()
	CronJobs().Strategy.Default(cj)
	s := cj.Spec
	if s.ConcurrencyPolicy != batchv1.AllowConcurrent || *s.Suspend || *s.SuccessfulJobsHistoryLimit != 3 || *s.FailedJobsHistoryLimit != 1 {
		t.Errorf("spec = %+v", s)
	}
	// The job template gets pod defaults but no job defaults.
	js := s.JobTemplate.Spec
	if js.BackoffLimit != nil || js.Completions != nil || js.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("job template = %+v", js)
	}
	r := CronJobs()
	if !reflect.DeepEqual(r.ShortNames, []string{"cj"}) || !reflect.DeepEqual(r.Categories, []string{"all"}) || r.Kind != "CronJob" {
		t.Errorf("identity = %+v", r)
	}
}

func TestCronJobValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*batchv1.CronJob)
		want   []wantError
	}{
		{"valid", func(*batchv1.CronJob) {}, nil},
		{"hourly", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "@hourly" }, nil},
		{"time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Europe/Berlin") }, nil},
		{"no schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "" },
			[]wantError{{"spec.schedule", field.ErrorTypeRequired}}},
		{"bad schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "every minute" },
			[]wantError{{"spec.schedule", field.ErrorTypeInvalid}}},
		{"six fields", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "0 * * * * *" },
			[]wantError{{"spec.schedule", field.ErrorTypeInvalid}}},
		{"TZ prefix", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC 0 * * * *" },
			[]wantError{{"spec.schedule", field.ErrorTypeInvalid}}},
		{"unknown zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Mars/Olympus") },
			[]wantError{{"spec.timeZone", field.ErrorTypeInvalid}}},
		{"local zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Local") },
			[]wantError{{"spec.timeZone", field.ErrorTypeInvalid}}},
		{"empty zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("") },
			[]wantError{{"spec.timeZone", field.ErrorTypeInvalid}}},
		{"bad concurrency", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = "Sometimes" },
			[]wantError{{"spec.concurrencyPolicy", field.ErrorTypeNotSupported}}},
		{"negative deadline", func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr(int64(-1)) },
			[]wantError{{"spec.startingDeadlineSeconds", field.ErrorTypeInvalid}}},
		{"negative history", func(cj *batchv1.CronJob) { cj.Spec.FailedJobsHistoryLimit = ptr(int32(-1)) },
			[]wantError{{"spec.failedJobsHistoryLimit", field.ErrorTypeInvalid}}},
		{"template restart always", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		},
			[]wantError{{"spec.jobTemplate.spec.template.spec.restartPolicy", field.ErrorTypeRequired}}},
		{"template selector", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []wantError{{"spec.jobTemplate.spec.selector", field.ErrorTypeInvalid}}},
		{"template manual selector", func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.ManualSelector = ptr(true) },
			[]wantError{{"spec.jobTemplate.spec.manualSelector", field.ErrorTypeNotSupported}}},
		{"template negative parallelism", func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.Parallelism = ptr(int32(-1)) },
			[]wantError{{"spec.jobTemplate.spec.parallelism", field.ErrorTypeInvalid}}},
		{"name too long", func(cj *batchv1.CronJob) { cj.Name = strings.Repeat("a", 53) },
			[]wantError{{"metadata.name", field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := newCronJob()
			tt.mutate(cj)
			checkErrors(t, createErrors(CronJobs(), cj), tt.want)
		})
	}
}

func TestCronJobMessages(t *testing.T) {
	cj := newCronJob()
	cj.Spec.Schedule = "CRON_TZ=UTC 0 * * * *"
	errs := createErrors(CronJobs(), cj)
	if len(errs) != 1 || errs[0].Detail != "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" {
		t.Errorf("errors = %v", errs)
	}
}

func TestCronJobValidateUpdate(t *testing.T) {
	// An object that already had a TZ= schedule may keep it, but not add timeZone too.
	old := newCronJob()
	old.Spec.Schedule = "TZ=UTC 0 * * * *"
	CronJobs().Strategy.Default(old)
	same := old.DeepCopy()
	same.Spec.Suspend = ptr(true)
	checkErrors(t, updateErrors(CronJobs(), same, old), nil)
	both := old.DeepCopy()
	both.Spec.TimeZone = ptr("UTC")
	checkErrors(t, updateErrors(CronJobs(), both, old), []wantError{{"spec.schedule", field.ErrorTypeInvalid}})

	// Long names are only refused on create.
	long := newCronJob()
	long.Name = strings.Repeat("a", 60)
	CronJobs().Strategy.Default(long)
	checkErrors(t, updateErrors(CronJobs(), long.DeepCopy(), long), nil)
}

func TestCronJobPrinter(t *testing.T) {
	p := CronJobs().Printer
	want := []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(p); !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v", got)
	}
	cj := newCronJob()
	CronJobs().Strategy.Default(cj)
	checkRow(t, p, cj, 6, []interface{}{"hello", "*/5 * * * *", "<none>", "False", int64(0), "<none>", "pi", "perl:5.34", "<none>"})

	last := metav1.NewTime(time.Now().Add(-30 * time.Minute)) // past 10m ages print whole minutes: "30m" for a minute
	cj.Spec.TimeZone = ptr("Asia/Tokyo")
	cj.Spec.Suspend = ptr(true)
	cj.Status = batchv1.CronJobStatus{LastScheduleTime: &last, Active: []corev1.ObjectReference{{Name: "hello-1"}, {Name: "hello-2"}}}
	checkRow(t, p, cj, 6, []interface{}{"hello", "*/5 * * * *", "Asia/Tokyo", "True", int64(2), "30m", "pi", "perl:5.34", "<none>"})
}

package batch_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// These tests run jobs and cronjobs in a real apiserver on embedded etcd and look at
// them as client-go and kubectl do.

func jobTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34"}},
	}}
}

func invalidCauses(t *testing.T, err error) []metav1.StatusCause {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v, want Invalid (422)", err)
	}
	return err.(apierrors.APIStatus).Status().Details.Causes
}

func TestBatchAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()

	t.Run("job gets a generated selector", func(t *testing.T) {
		j, err := c.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "pi"},
			Spec:       batchv1.JobSpec{Template: jobTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid := string(j.UID)
		want := map[string]string{
			"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
			"controller-uid": uid, "job-name": "pi",
		}
		if uid == "" || !reflect.DeepEqual(j.Spec.Template.Labels, want) || !reflect.DeepEqual(j.Labels, want) ||
			!reflect.DeepEqual(j.Spec.Selector.MatchLabels, map[string]string{"batch.kubernetes.io/controller-uid": uid}) {
			t.Errorf("job = %+v", j)
		}
		if *j.Spec.Completions != 1 || *j.Spec.Parallelism != 1 || *j.Spec.BackoffLimit != 6 ||
			*j.Spec.CompletionMode != batchv1.NonIndexedCompletion || *j.Spec.Suspend || *j.Spec.PodReplacementPolicy != batchv1.TerminatingOrFailed {
			t.Errorf("job spec = %+v", j.Spec)
		}

		list, err := c.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{FieldSelector: "status.successful=0"})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("field selector: %d jobs, %v", len(list.Items), err)
		}

		raw, err := c.BatchV1().RESTClient().Get().Namespace("default").Resource("jobs").Name("pi").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Raw()
		if err != nil {
			t.Fatal(err)
		}
		var tbl metav1.Table
		if err := json.Unmarshal(raw, &tbl); err != nil {
			t.Fatal(err)
		}
		if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "Running" || tbl.Rows[0].Cells[2] != "0/1" ||
			tbl.Rows[0].Cells[7] != "batch.kubernetes.io/controller-uid="+uid {
			t.Errorf("table rows = %+v", tbl.Rows)
		}
	})

	t.Run("job restart policy", func(t *testing.T) {
		tmpl := jobTemplate()
		tmpl.Spec.RestartPolicy = ""
		_, err := c.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "always"},
			Spec:       batchv1.JobSpec{Template: tmpl},
		}, metav1.CreateOptions{})
		got := invalidCauses(t, err)
		if len(got) != 1 || got[0].Field != "spec.template.spec.restartPolicy" || got[0].Type != metav1.CauseTypeFieldValueRequired ||
			got[0].Message != `Required value: valid values: "OnFailure", "Never"` {
			t.Errorf("causes = %+v", got)
		}
	})

	t.Run("job template is immutable", func(t *testing.T) {
		j, err := c.BatchV1().Jobs("default").Get(ctx, "pi", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j.Spec.Template.Spec.Containers[0].Image = "perl:6"
		_, err = c.BatchV1().Jobs("default").Update(ctx, j, metav1.UpdateOptions{})
		if got := invalidCauses(t, err); len(got) != 1 || got[0].Field != "spec.template" {
			t.Errorf("causes = %+v", got)
		}
	})

	t.Run("cronjob", func(t *testing.T) {
		cj, err := c.BatchV1().CronJobs("default").Create(ctx, &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: batchv1.CronJobSpec{Schedule: "@hourly", TimeZone: ptr("Europe/Paris"),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || *cj.Spec.SuccessfulJobsHistoryLimit != 3 || *cj.Spec.FailedJobsHistoryLimit != 1 {
			t.Errorf("cronjob = %+v", cj.Spec)
		}
		for schedule, field := range map[string]string{"every hour": "spec.schedule", "TZ=UTC 0 * * * *": "spec.schedule"} {
			_, err := c.BatchV1().CronJobs("default").Create(ctx, &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Spec:       batchv1.CronJobSpec{Schedule: schedule, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}}},
			}, metav1.CreateOptions{})
			if got := invalidCauses(t, err); len(got) != 1 || got[0].Field != field {
				t.Errorf("%q: causes = %+v", schedule, got)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

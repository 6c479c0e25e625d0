package batch

import (
	"math"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const piUID = "6f2c1f0e-5a7b-4c1d-9e3f-0a1b2c3d4e5f"

func newJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: piUID},
		Spec:       batchv1.JobSpec{Template: piTemplate()},
	}
}

func TestJobIdentityAndFields(t *testing.T) {
	r := Jobs()
	if r.Resource != "jobs" || r.Kind != "Job" || r.SingularName != "job" || len(r.ShortNames) != 0 ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.HasStatus || r.Scale != nil {
		t.Errorf("identity = %+v", r)
	}
	j := newJob()
	j.Status.Succeeded = 2
	if got := r.Fields(j); !reflect.DeepEqual(map[string]string(got), map[string]string{"status.successful": "2"}) {
		t.Errorf("fields = %v", got)
	}
}

func TestJobDefaults(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*batchv1.Job)
		check  func(*testing.T, batchv1.JobSpec)
	}{
		{"single pod", func(*batchv1.Job) {}, func(t *testing.T, s batchv1.JobSpec) {
			want := batchv1.JobSpec{
				Completions:          ptr(int32(1)),
				Parallelism:          ptr(int32(1)),
				BackoffLimit:         ptr(int32(6)),
				CompletionMode:       ptr(batchv1.NonIndexedCompletion),
				Suspend:              ptr(false),
				PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed),
			}
			s.Template = corev1.PodTemplateSpec{}
			if !reflect.DeepEqual(s, want) {
				t.Errorf("spec = %+v\nwant %+v", s, want)
			}
		}},
		{"work queue keeps completions unset", func(j *batchv1.Job) { j.Spec.Parallelism = ptr(int32(3)) },
			func(t *testing.T, s batchv1.JobSpec) {
				if s.Completions != nil || *s.Parallelism != 3 {
					t.Errorf("completions %v parallelism %v", s.Completions, *s.Parallelism)
				}
			}},
		{"completions alone get parallelism 1", func(j *batchv1.Job) { j.Spec.Completions = ptr(int32(5)) },
			func(t *testing.T, s batchv1.JobSpec) {
				if *s.Completions != 5 || *s.Parallelism != 1 {
					t.Errorf("completions %v parallelism %v", *s.Completions, *s.Parallelism)
				}
			}},
		{"backoff per index", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr(int32(1)) },
			func(t *testing.T, s batchv1.JobSpec) {
				if *s.BackoffLimit != math.MaxInt32 {
					t.Errorf("backoffLimit = %d", *s.BackoffLimit)
				}
			}},
		{"pod failure policy", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
			}}}
		}, func(t *testing.T, s batchv1.JobSpec) {
			if *s.PodReplacementPolicy != batchv1.Failed || s.PodFailurePolicy.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
				t.Errorf("spec = %+v", s)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob()
			tt.mutate(j)
			Jobs().Strategy.Default(j)
			tt.check(t, j.Spec)
			if j.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
				t.Errorf("pod template not defaulted")
			}
		})
	}
}

func TestJobCreateGeneratesSelector(t *testing.T) {
	j := newJob()
	j.Status.Active = 4
	if errs := createErrors(Jobs(), j); len(errs) != 0 {
		t.Fatalf("valid job rejected: %v", errs)
	}
	wantLabels := map[string]string{
		"batch.kubernetes.io/controller-uid": piUID,
		"batch.kubernetes.io/job-name":       "pi",
		"controller-uid":                     piUID,
		"job-name":                           "pi",
	}
	if !reflect.DeepEqual(j.Spec.Template.Labels, wantLabels) {
		t.Errorf("template labels = %v", j.Spec.Template.Labels)
	}
	if !reflect.DeepEqual(j.Labels, wantLabels) {
		t.Errorf("job labels = %v", j.Labels)
	}
	wantSel := &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": piUID}}
	if !reflect.DeepEqual(j.Spec.Selector, wantSel) {
		t.Errorf("selector = %v", j.Spec.Selector)
	}
	if j.Status.Active != 0 {
		t.Errorf("status not cleared: %+v", j.Status)
	}

	// The alpha spec.scheduling is dropped, as with its feature gate off.
	gang := newJob()
	gang.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{}
	createErrors(Jobs(), gang)
	if gang.Spec.Scheduling != nil {
		t.Errorf("scheduling = %+v, want dropped", gang.Spec.Scheduling)
	}

	// Labels the client set on the job are kept.
	own := newJob()
	own.Labels = map[string]string{"team": "math"}
	createErrors(Jobs(), own)
	if !reflect.DeepEqual(own.Labels, map[string]string{"team": "math"}) {
		t.Errorf("job labels = %v", own.Labels)
	}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []wantError
	}{
		{"valid", func(*batchv1.Job) {}, nil},
		{"restart always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			[]wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeRequired}}},
		{"restart unset", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "" },
			[]wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeRequired}}},
		{"negative parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr(int32(-1)) },
			[]wantError{{"spec.parallelism", field.ErrorTypeInvalid}}},
		{"negative completions", func(j *batchv1.Job) { j.Spec.Completions = ptr(int32(-1)) },
			[]wantError{{"spec.completions", field.ErrorTypeInvalid}}},
		{"negative backoff", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr(int32(-1)) },
			[]wantError{{"spec.backoffLimit", field.ErrorTypeInvalid}}},
		{"negative deadline", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr(int64(-5)) },
			[]wantError{{"spec.activeDeadlineSeconds", field.ErrorTypeInvalid}}},
		{"indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Parallelism = ptr(int32(2))
		}, []wantError{{"spec.completions", field.ErrorTypeRequired}}},
		{"indexed too parallel", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr(int32(200000))
			j.Spec.Parallelism = ptr(int32(200000))
		}, []wantError{{"spec.parallelism", field.ErrorTypeInvalid}}},
		{"unknown completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr(batchv1.CompletionMode("Sometimes")) },
			[]wantError{{"spec.completionMode", field.ErrorTypeNotSupported}}},
		{"backoff per index needs indexed", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr(int32(1)) },
			[]wantError{{"spec.backoffLimitPerIndex", field.ErrorTypeInvalid}}},
		{"user selector without manualSelector", func(j *batchv1.Job) {
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
			j.Spec.Template.Labels = map[string]string{"app": "pi"}
		}, []wantError{{"spec.selector", field.ErrorTypeInvalid}}},
		{"manual selector matching", func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
			j.Spec.Template.Labels = map[string]string{"app": "pi"}
		}, nil},
		{"manual selector not matching", func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
			j.Spec.Template.Labels = map[string]string{"app": "e"}
		}, []wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"manual without selector", func(j *batchv1.Job) { j.Spec.ManualSelector = ptr(true) },
			[]wantError{{"spec.selector", field.ErrorTypeRequired}}},
		{"generated label set by the client", func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{"batch.kubernetes.io/job-name": "other"}
		}, []wantError{{"spec.template.metadata.labels[batch.kubernetes.io/job-name]", field.ErrorTypeInvalid}}},
		{"pod failure policy needs Never", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			}}}
		}, []wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeInvalid}}},
		{"pod failure policy rules", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: "Explode", OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: "Maybe", Values: []int32{1}}},
				{Action: batchv1.PodFailurePolicyActionIgnore},
				{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{0, 3, 3}}},
			}}
		}, []wantError{
			{"spec.podFailurePolicy.rules[0].action", field.ErrorTypeNotSupported},
			{"spec.podFailurePolicy.rules[0].onExitCodes.operator", field.ErrorTypeNotSupported},
			{"spec.podFailurePolicy.rules[1]", field.ErrorTypeInvalid},
			{"spec.podFailurePolicy.rules[2].onExitCodes.values[0]", field.ErrorTypeInvalid},
			{"spec.podFailurePolicy.rules[2].onExitCodes.values[2]", field.ErrorTypeDuplicate},
		}},
		{"replacement policy with failure policy", func(j *batchv1.Job) {
			j.Spec.PodReplacementPolicy = ptr(batchv1.TerminatingOrFailed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}
		}, []wantError{{"spec.podReplacementPolicy", field.ErrorTypeNotSupported}}},
		{"indexed name too long for pod hostnames", func(j *batchv1.Job) {
			j.Name = "a23456789012345678901234567890123456789012345678901234567890"
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr(int32(1000))
		}, []wantError{{"metadata.name", field.ErrorTypeInvalid}}},
		{"success policy", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr(int32(10))
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{SucceededIndexes: ptr("0,2-4,9"), SucceededCount: ptr(int32(5))},
				{SucceededCount: ptr(int32(10))},
			}}
		}, nil},
		{"success policy rules", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr(int32(10))
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{},
				{SucceededIndexes: ptr("3-1")},
				{SucceededIndexes: ptr("1,1")},
				{SucceededIndexes: ptr("10")},
				{SucceededIndexes: ptr("1-2"), SucceededCount: ptr(int32(3))},
				{SucceededCount: ptr(int32(11))},
			}}
		}, []wantError{
			{"spec.successPolicy.rules[0]", field.ErrorTypeRequired},
			{"spec.successPolicy.rules[1].succeededIndexes", field.ErrorTypeInvalid},
			{"spec.successPolicy.rules[2].succeededIndexes", field.ErrorTypeInvalid},
			{"spec.successPolicy.rules[3].succeededIndexes", field.ErrorTypeInvalid},
			{"spec.successPolicy.rules[4].succeededCount", field.ErrorTypeInvalid},
			{"spec.successPolicy.rules[5].succeededCount", field.ErrorTypeInvalid},
		}},
		{"success policy needs indexed", func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr(int32(1))}}}
		}, []wantError{{"spec.completionMode", field.ErrorTypeInvalid}}},
		{"managed by", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr("kueue.x-k8s.io/multikueue") }, nil},
		{"managed by not a domain path", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr("kueue") },
			[]wantError{{"spec.managedBy", field.ErrorTypeInvalid}}},
		{"name too long for the label", func(j *batchv1.Job) { j.Name = "a23456789012345678901234567890123456789012345678901234567890abcd" },
			[]wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}, {"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob()
			tt.mutate(j)
			checkErrors(t, createErrors(Jobs(), j), tt.want)
		})
	}
}

func TestJobRestartPolicyMessage(t *testing.T) {
	j := newJob()
	j.Spec.Template.Spec.RestartPolicy = ""
	errs := createErrors(Jobs(), j)
	if len(errs) != 1 || errs[0].Error() != `spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"` {
		t.Errorf("errors = %v", errs)
	}
}

// createdJob returns a job as the server stores it after create.
func createdJob(t *testing.T, mutate func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	j := newJob()
	mutate(j)
	if errs := createErrors(Jobs(), j); len(errs) != 0 {
		t.Fatalf("create: %v", errs)
	}
	return j
}

func TestJobValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		create func(*batchv1.Job)
		update func(*batchv1.Job)
		want   []wantError
	}{
		{"parallelism", func(*batchv1.Job) {}, func(j *batchv1.Job) { j.Spec.Parallelism = ptr(int32(4)) }, nil},
		{"suspend", func(*batchv1.Job) {}, func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }, nil},
		{"completions", func(*batchv1.Job) {}, func(j *batchv1.Job) { j.Spec.Completions = ptr(int32(4)) },
			[]wantError{{"spec.completions", field.ErrorTypeInvalid}}},
		{"indexed completions with parallelism", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions, j.Spec.Parallelism = ptr(int32(3)), ptr(int32(3))
		}, func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = ptr(int32(5)), ptr(int32(5)) }, nil},
		{"indexed completions alone", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Completions, j.Spec.Parallelism = ptr(int32(3)), ptr(int32(3))
		}, func(j *batchv1.Job) { j.Spec.Completions = ptr(int32(5)) },
			[]wantError{{"spec.completions", field.ErrorTypeInvalid}}},
		{"selector", func(*batchv1.Job) {}, func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels["job-name"] = "pi"
		}, []wantError{{"spec.selector", field.ErrorTypeInvalid}}},
		{"image of a running job", func(*batchv1.Job) {}, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "perl:6" },
			[]wantError{{"spec.template", field.ErrorTypeInvalid}}},
		{"node selector of a running job", func(*batchv1.Job) {}, func(j *batchv1.Job) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}, []wantError{{"spec.template", field.ErrorTypeInvalid}}},
		{"node selector of a suspended job", func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }, func(j *batchv1.Job) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}, nil},
		{"status counts", func(*batchv1.Job) {}, func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Active: 1, Failed: -1, Ready: ptr(int32(-2))}
		}, []wantError{{"status.failed", field.ErrorTypeInvalid}, {"status.ready", field.ErrorTypeInvalid}}},
		{"completion mode", func(*batchv1.Job) {}, func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
		}, []wantError{{"spec.completionMode", field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := createdJob(t, tt.create)
			j := old.DeepCopy()
			tt.update(j)
			checkErrors(t, updateErrors(Jobs(), j, old), tt.want)
		})
	}
}

func TestJobPrinter(t *testing.T) {
	p := Jobs().Printer
	want := []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(p); !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v", got)
	}
	start := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	done := metav1.NewTime(start.Add(75 * time.Second))
	cond := func(typ batchv1.JobConditionType) []batchv1.JobCondition {
		return []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue}}
	}
	tests := []struct {
		name   string
		mutate func(*batchv1.Job)
		cells  []interface{}
	}{
		{"not started", func(*batchv1.Job) {}, []interface{}{"Running", "0/1", ""}},
		{"complete", func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &done, Conditions: cond(batchv1.JobComplete)}
		}, []interface{}{"Complete", "1/1", "75s"}},
		{"failed", func(j *batchv1.Job) { j.Status.Conditions = cond(batchv1.JobFailed) }, []interface{}{"Failed", "0/1", ""}},
		{"suspended", func(j *batchv1.Job) { j.Status.Conditions = cond(batchv1.JobSuspended) }, []interface{}{"Suspended", "0/1", ""}},
		{"failure target", func(j *batchv1.Job) { j.Status.Conditions = cond(batchv1.JobFailureTarget) }, []interface{}{"FailureTarget", "0/1", ""}},
		{"terminating", func(j *batchv1.Job) { j.DeletionTimestamp = &done }, []interface{}{"Terminating", "0/1", ""}},
		{"work queue", func(j *batchv1.Job) { j.Spec.Completions = nil; j.Spec.Parallelism = ptr(int32(4)) }, []interface{}{"Running", "0/1 of 4", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := createdJob(t, func(*batchv1.Job) {})
			tt.mutate(j)
			cells := append(append([]interface{}{"pi"}, tt.cells...), "pi", "perl:5.34", "batch.kubernetes.io/controller-uid="+piUID)
			checkRow(t, p, j, 4, cells)
		})
	}
}

func TestCountIndexes(t *testing.T) {
	tests := []struct {
		list    string
		want    int32
		wantErr bool
	}{
		{"0", 1, false},
		{"0,2-4,9", 5, false},
		{"0-9", 10, false},
		{"", 0, true},
		{"a", 0, true},
		{"1-2-3", 0, true},
		{"4-2", 0, true},
		{"2,1", 0, true},
		{"1-3,3", 0, true},
		{"10", 0, true},
	}
	for _, tt := range tests {
		got, err := countIndexes(tt.list, 10)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("countIndexes(%q) = %d, %v; want %d, error %v", tt.list, got, err, tt.want, tt.wantErr)
		}
	}
}

package batch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// The unprefixed labels generated jobs still carry next to the batch.kubernetes.io ones.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

// Jobs describes batch/v1 jobs.
func Jobs() *registry.Resource {
	return &registry.Resource{
		GroupVersion: batchv1.SchemeGroupVersion,
		Resource:     "jobs",
		Kind:         "Job",
		SingularName: "job",
		Namespaced:   true,
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &batchv1.Job{} },
		NewList:      func() runtime.Object { return &batchv1.JobList{} },
		Strategy:     jobStrategy{},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(obj.(*batchv1.Job).Status.Succeeded))}
		},
		Printer:   jobPrinter(),
		HasStatus: true,
	}
}

type jobStrategy struct{ registry.BaseStrategy }

// Default applies upstream's batch/v1 job defaults and the pod template's.
func (jobStrategy) Default(obj runtime.Object) {
	job := obj.(*batchv1.Job)
	spec := &job.Spec
	// A job with neither completions nor parallelism runs one pod to completion.
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr(int32(1))
		spec.Parallelism = ptr(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr(int32(1))
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptr(int32(math.MaxInt32))
		} else {
			spec.BackoffLimit = ptr(int32(6))
		}
	}
	if len(job.Labels) == 0 && spec.Template.Labels != nil {
		job.Labels = copyLabels(spec.Template.Labels)
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr(false)
	}
	if spec.PodFailurePolicy != nil {
		for _, rule := range spec.PodFailurePolicy.Rules {
			for i := range rule.OnPodConditions {
				if rule.OnPodConditions[i].Status == "" {
					rule.OnPodConditions[i].Status = corev1.ConditionTrue
				}
			}
		}
	}
	if spec.PodReplacementPolicy == nil {
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptr(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptr(batchv1.TerminatingOrFailed)
		}
	}
	core.DefaultPodSpec(&spec.Template.Spec)
}

// PrepareForCreate clears the status and, unless the client chose its own selector
// (manualSelector), generates the selector and pod labels from the job's uid and name.
func (jobStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	job := obj.(*batchv1.Job)
	job.Status = batchv1.JobStatus{}
	// spec.scheduling belongs to the alpha WorkloadWithJob feature, off by default:
	// upstream drops it.
	job.Spec.Scheduling = nil
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		generateSelector(job)
	}
	// Upstream copies the template labels to a label-less job when it defaults the
	// stored object; the generated labels are part of what it copies.
	if len(job.Labels) == 0 && job.Spec.Template.Labels != nil {
		job.Labels = copyLabels(job.Spec.Template.Labels)
	}
}

// PrepareForUpdate drops spec.scheduling (alpha, off) unless the job already had it.
func (jobStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if job := obj.(*batchv1.Job); old.(*batchv1.Job).Spec.Scheduling == nil {
		job.Spec.Scheduling = nil
	}
}

// generateSelector labels the pod template with the job's name and uid (under both the
// legacy and the batch.kubernetes.io keys) and selects on the uid.
func generateSelector(job *batchv1.Job) {
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	tl := job.Spec.Template.Labels
	for _, key := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if _, found := tl[key]; !found {
			tl[key] = job.Name
		}
	}
	for _, key := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, found := tl[key]; !found {
			tl[key] = string(job.UID)
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !found {
		job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(job.UID)
	}
}

func (jobStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	job := obj.(*batchv1.Job)
	allErrs := validateGeneratedSelector(job)
	allErrs = append(allErrs, validateJobSpec(&job.Spec, field.NewPath("spec"))...)
	// An Indexed job's pods are named <job>-<index>, which must be a DNS label.
	if m, n := job.Spec.CompletionMode, job.Spec.Completions; m != nil && *m == batchv1.IndexedCompletion && n != nil && *n > 0 {
		hostname := fmt.Sprintf("%s-%d", job.Name, *n-1)
		if len(validation.IsDNS1123Label(hostname)) > 0 {
			allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), job.Name,
				fmt.Sprintf("will not able to create pod with invalid DNS label: %s", hostname)))
		}
	}
	return allErrs
}

// ValidateUpdate keeps what a running job depends on fixed; an Indexed job may change
// completions together with parallelism, and a suspended job that never started may
// change where its pods go.
func (jobStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	job, oldJob := obj.(*batchv1.Job), old.(*batchv1.Job)
	fldPath := field.NewPath("spec")
	spec, oldSpec := &job.Spec, &oldJob.Spec
	allErrs := validateJobSpec(spec, fldPath)

	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if !indexed {
		allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.Completions, oldSpec.Completions, fldPath.Child("completions"))...)
	} else if !equalInt32(spec.Completions, oldSpec.Completions) && !equalInt32(spec.Completions, spec.Parallelism) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("completions"), spec.Completions,
			fmt.Sprintf("can only be modified in tandem with %s", fldPath.Child("parallelism"))))
	}
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.Selector, oldSpec.Selector, fldPath.Child("selector"))...)
	allErrs = append(allErrs, validateTemplateUpdate(oldJob, spec, oldSpec, fldPath)...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.CompletionMode, oldSpec.CompletionMode, fldPath.Child("completionMode"))...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.PodFailurePolicy, oldSpec.PodFailurePolicy, fldPath.Child("podFailurePolicy"))...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.BackoffLimitPerIndex, oldSpec.BackoffLimitPerIndex, fldPath.Child("backoffLimitPerIndex"))...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.ManagedBy, oldSpec.ManagedBy, fldPath.Child("managedBy"))...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(spec.SuccessPolicy, oldSpec.SuccessPolicy, fldPath.Child("successPolicy"))...)
	return append(allErrs, validateJobStatus(&job.Status, &oldJob.Status)...)
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func jobPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Status", Type: "string", Description: "Status of the job."},
			{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
			{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []interface{} {
			job := obj.(*batchv1.Job)
			names, images := containerCells(job.Spec.Template.Spec.Containers)
			return []interface{}{job.Name, jobStatus(job), jobCompletions(job), jobDuration(job),
				registry.Age(job.CreationTimestamp), names, images, metav1.FormatLabelSelector(job.Spec.Selector)}
		},
	}
}

// jobCompletions is the COMPLETIONS cell: "1/3", or "0/1 of 4" for a work queue.
func jobCompletions(job *batchv1.Job) string {
	if job.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	}
	if job.Spec.Parallelism != nil && *job.Spec.Parallelism > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, *job.Spec.Parallelism)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

// jobDuration is the DURATION cell: from start to completion, or to now while running.
func jobDuration(job *batchv1.Job) string {
	switch {
	case job.Status.StartTime == nil:
		return ""
	case job.Status.CompletionTime == nil:
		return duration.HumanDuration(time.Since(job.Status.StartTime.Time))
	default:
		return duration.HumanDuration(job.Status.CompletionTime.Sub(job.Status.StartTime.Time))
	}
}

// jobStatus is the STATUS cell, from the job's conditions in upstream's order.
func jobStatus(job *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range job.Status.Conditions {
			if c.Type == t {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	default:
		return "Running"
	}
}

// ValidateStatusUpdate checks a write through the status subresource: the status
// only, as upstream's status strategy (the spec is the stored one).
func (jobStrategy) ValidateStatusUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateJobStatus(&obj.(*batchv1.Job).Status, &old.(*batchv1.Job).Status)
}

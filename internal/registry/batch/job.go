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
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// maxParallelismForIndexedJob caps parallelism of Indexed jobs, as upstream.
const maxParallelismForIndexedJob = 100000

// The unprefixed labels generated jobs still carry next to the batch.kubernetes.io ones.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

// maxPodFailurePolicyRules caps spec.podFailurePolicy.rules, as upstream.
const maxPodFailurePolicyRules = 20

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
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		generateSelector(job)
	}
	// Upstream copies the template labels to a label-less job when it defaults the
	// stored object; the generated labels are part of what it copies.
	if len(job.Labels) == 0 && job.Spec.Template.Labels != nil {
		job.Labels = copyLabels(job.Spec.Template.Labels)
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
	return append(allErrs, validateJobSpec(&job.Spec, field.NewPath("spec"))...)
}

// validateGeneratedSelector checks that a job without manualSelector selects exactly
// its own pods: by its uid.
func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector {
		return nil
	}
	var allErrs field.ErrorList
	if job.UID == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	if job.Spec.Selector == nil {
		return append(allErrs, field.Required(field.NewPath("spec", "selector"), ""))
	}
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set{batchv1.ControllerUidLabel: string(job.UID)}) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "selector"), job.Spec.Selector, "`selector` not auto-generated"))
	}
	return allErrs
}

// validateJobSpec checks a job's spec: what a job template must satisfy, plus a selector
// that selects the template's labels.
func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateJobTemplateSpecCommon(spec, fldPath)
	if spec.Selector == nil {
		return append(allErrs, field.Required(fldPath.Child("selector"), ""))
	}
	allErrs = append(allErrs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	return allErrs
}

// validateJobTemplateSpecCommon checks what jobs and cronjob job templates share.
func validateJobTemplateSpecCommon(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	nonneg := func(v *int32, name string) {
		if v != nil {
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*v), fldPath.Child(name))...)
		}
	}
	nonneg(spec.Parallelism, "parallelism")
	nonneg(spec.Completions, "completions")
	if spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	nonneg(spec.BackoffLimit, "backoffLimit")
	nonneg(spec.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	nonneg(spec.BackoffLimitPerIndex, "backoffLimitPerIndex")
	if spec.MaxFailedIndexes != nil {
		nonneg(spec.MaxFailedIndexes, "maxFailedIndexes")
		if spec.BackoffLimitPerIndex == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}

	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if m := spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("completionMode"), *m,
			[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
	}
	if indexed {
		if spec.Completions == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
		}
		if spec.Parallelism != nil && *spec.Parallelism > maxParallelismForIndexedJob {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
		}
		if spec.Completions != nil && spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > *spec.Completions {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "must be less than or equal to completions"))
		}
	} else {
		if spec.BackoffLimitPerIndex != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if spec.MaxFailedIndexes != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}

	if spec.PodFailurePolicy != nil {
		allErrs = append(allErrs, validatePodFailurePolicy(spec, fldPath)...)
	}
	if p := spec.PodReplacementPolicy; p != nil {
		switch {
		case spec.PodFailurePolicy != nil && *p != batchv1.Failed:
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *p, []batchv1.PodReplacementPolicy{batchv1.Failed}))
		case *p != batchv1.Failed && *p != batchv1.TerminatingOrFailed:
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *p,
				[]batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed}))
		}
	}

	tp := fldPath.Child("template")
	allErrs = append(allErrs, core.ValidatePodTemplateSpec(&spec.Template, tp)...)
	// Defaulting turns an unset restartPolicy into Always, which a job cannot use.
	switch rp := spec.Template.Spec.RestartPolicy; rp {
	case corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	case corev1.RestartPolicyAlways, "":
		allErrs = append(allErrs, field.Required(tp.Child("spec", "restartPolicy"),
			fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	default:
		allErrs = append(allErrs, field.NotSupported(tp.Child("spec", "restartPolicy"), rp,
			[]corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	return allErrs
}

// validatePodFailurePolicy checks the rules of a job spec's podFailurePolicy; specPath
// is the job spec's path.
func validatePodFailurePolicy(spec *batchv1.JobSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	fldPath := specPath.Child("podFailurePolicy")
	rulesPath := fldPath.Child("rules")
	if len(spec.PodFailurePolicy.Rules) > maxPodFailurePolicyRules {
		allErrs = append(allErrs, field.TooMany(rulesPath, len(spec.PodFailurePolicy.Rules), maxPodFailurePolicyRules))
	}
	if rp := spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever {
		allErrs = append(allErrs, field.Invalid(specPath.Child("template", "spec", "restartPolicy"), rp,
			fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailIndex,
		batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount}
	for i, rule := range spec.PodFailurePolicy.Rules {
		p := rulesPath.Index(i)
		known := false
		for _, a := range actions {
			known = known || rule.Action == a
		}
		if !known {
			allErrs = append(allErrs, field.NotSupported(p.Child("action"), rule.Action, actions))
		}
		if rule.Action == batchv1.PodFailurePolicyActionFailIndex && spec.BackoffLimitPerIndex == nil {
			allErrs = append(allErrs, field.Invalid(p.Child("action"), rule.Action, "requires the backoffLimitPerIndex to be set"))
		}
		switch {
		case rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0:
			allErrs = append(allErrs, field.Invalid(p, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0:
			allErrs = append(allErrs, field.Invalid(p, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		case rule.OnExitCodes != nil:
			allErrs = append(allErrs, validateOnExitCodes(rule.OnExitCodes, p.Child("onExitCodes"))...)
		default:
			for j, c := range rule.OnPodConditions {
				cp := p.Child("onPodConditions").Index(j)
				if c.Status != corev1.ConditionTrue && c.Status != corev1.ConditionFalse && c.Status != corev1.ConditionUnknown {
					allErrs = append(allErrs, field.NotSupported(cp.Child("status"), c.Status,
						[]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}))
				}
				if c.Type == "" {
					allErrs = append(allErrs, field.Required(cp.Child("type"), ""))
				}
			}
		}
	}
	return allErrs
}

func validateOnExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if req.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn && req.Operator != batchv1.PodFailurePolicyOnExitCodesOpNotIn {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("operator"), req.Operator,
			[]batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn}))
	}
	if len(req.Values) == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("values"), req.Values, "at least one value is required"))
	}
	for i, v := range req.Values {
		switch {
		case req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0:
			allErrs = append(allErrs, field.Invalid(fldPath.Child("values").Index(i), v, "must not be 0 for the In operator"))
		case i > 0 && req.Values[i-1] == v:
			allErrs = append(allErrs, field.Duplicate(fldPath.Child("values").Index(i), v))
		case i > 0 && req.Values[i-1] > v:
			allErrs = append(allErrs, field.Invalid(fldPath.Child("values").Index(i), v, "must be ordered"))
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
	return allErrs
}

// validateTemplateUpdate keeps the pod template fixed, except the scheduling directives
// (node selector, affinity's node part, tolerations, gates, labels, annotations) of a
// job that is suspended and has never started.
func validateTemplateUpdate(oldJob *batchv1.Job, spec, oldSpec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	oldTemplate := &oldSpec.Template
	suspended := oldSpec.Suspend != nil && *oldSpec.Suspend
	if suspended && oldJob.Status.StartTime == nil {
		t := &spec.Template
		oldTemplate = oldTemplate.DeepCopy()
		switch {
		case t.Spec.Affinity == nil && oldTemplate.Spec.Affinity != nil:
			oldTemplate.Spec.Affinity.NodeAffinity = nil
			if *oldTemplate.Spec.Affinity == (corev1.Affinity{}) {
				oldTemplate.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && oldTemplate.Spec.Affinity == nil:
			oldTemplate.Spec.Affinity = &corev1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil && oldTemplate.Spec.Affinity != nil:
			oldTemplate.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
		oldTemplate.Spec.NodeSelector = t.Spec.NodeSelector
		oldTemplate.Spec.Tolerations = t.Spec.Tolerations
		oldTemplate.Spec.SchedulingGates = t.Spec.SchedulingGates
		oldTemplate.Annotations = t.Annotations
		oldTemplate.Labels = t.Labels
	}
	return apivalidation.ValidateImmutableField(&spec.Template, oldTemplate, fldPath.Child("template"))
}

func equalInt32(a, b *int32) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
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

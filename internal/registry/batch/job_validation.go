package batch

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/core"
)

// Limits upstream puts on job specs.
const (
	maxParallelismForIndexedJob = 100000
	maxPodFailurePolicyRules    = 20
	maxSuccessPolicyRules       = 20
	maxSucceededIndexesLength   = 64 * 1024
	maxManagedByLength          = 63
)

// validateGeneratedSelector checks that a job without manualSelector carries the
// generated labels on its pod template and selects by them: a client that sets its own
// selector must say manualSelector.
func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	if (job.Spec.ManualSelector != nil && *job.Spec.ManualSelector) || job.Spec.Selector == nil {
		return nil
	}
	var allErrs field.ErrorList
	if job.UID == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	expected := labels.Set{
		legacyControllerUIDLabel:   string(job.UID),
		legacyJobNameLabel:         job.Name,
		batchv1.ControllerUidLabel: string(job.UID),
		batchv1.JobNameLabel:       job.Name,
	}
	labelsPath := field.NewPath("spec", "template", "metadata", "labels")
	for _, key := range []string{legacyControllerUIDLabel, legacyJobNameLabel, batchv1.ControllerUidLabel, batchv1.JobNameLabel} {
		want := expected[key]
		got, found := job.Spec.Template.Labels[key]
		switch {
		case !found:
			allErrs = append(allErrs, field.Required(labelsPath.Key(key), fmt.Sprintf("must be '%s'", want)))
		case got != want:
			allErrs = append(allErrs, field.Invalid(labelsPath.Key(key), job.Spec.Template.Labels, fmt.Sprintf("must be '%s'", want)))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && !sel.Matches(expected) {
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
	if spec.SuccessPolicy != nil {
		if !indexed {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("completionMode"), spec.CompletionMode, "requires indexed completion mode"))
		} else {
			allErrs = append(allErrs, validateSuccessPolicy(spec, fldPath.Child("successPolicy"))...)
		}
	}
	if mb := spec.ManagedBy; mb != nil {
		p := fldPath.Child("managedBy")
		allErrs = append(allErrs, validation.IsDomainPrefixedPath(p, *mb)...)
		if len(*mb) > maxManagedByLength {
			allErrs = append(allErrs, field.TooLong(p, "", maxManagedByLength))
		}
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

// validateSuccessPolicy checks the rules of an Indexed job's successPolicy.
func validateSuccessPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := spec.SuccessPolicy.Rules
	if len(rules) == 0 {
		allErrs = append(allErrs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		allErrs = append(allErrs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := int32(0)
	if spec.Completions != nil {
		completions = *spec.Completions
	}
	for i, rule := range rules {
		p := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			allErrs = append(allErrs, field.Required(p, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var indexes int32
		if rule.SucceededIndexes != nil {
			ip := p.Child("succeededIndexes")
			if len(*rule.SucceededIndexes) > maxSucceededIndexesLength {
				allErrs = append(allErrs, field.TooLong(ip, "", maxSucceededIndexesLength))
			}
			n, err := countIndexes(*rule.SucceededIndexes, completions)
			if err != nil {
				allErrs = append(allErrs, field.Invalid(ip, *rule.SucceededIndexes, fmt.Sprintf("error parsing succeededIndexes: %s", err)))
			}
			indexes = n
		}
		if c := rule.SucceededCount; c != nil {
			cp := p.Child("succeededCount")
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*c), cp)...)
			if *c > completions {
				allErrs = append(allErrs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *c > indexes {
				allErrs = append(allErrs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", indexes)))
			}
		}
	}
	return allErrs
}

// countIndexes parses an index list such as "1,3-5,7": increasing, non-overlapping
// indexes and ranges below completions. It returns how many indexes the list names.
func countIndexes(list string, completions int32) (int32, error) {
	var total int32
	prev := int64(-1)
	for _, part := range strings.Split(list, ",") {
		bounds := strings.Split(part, "-")
		if len(bounds) > 2 {
			return 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", part)
		}
		var nums []int64
		for _, b := range bounds {
			n, err := strconv.ParseInt(b, 10, 32)
			if err != nil {
				return 0, fmt.Errorf("cannot convert string to integer for index: %q", b)
			}
			if n < 0 {
				return 0, fmt.Errorf("too small index: %d", n)
			}
			if n >= int64(completions) {
				return 0, fmt.Errorf("too large index: %d", n)
			}
			nums = append(nums, n)
		}
		first, last := nums[0], nums[len(nums)-1]
		if first > last {
			return 0, fmt.Errorf("the fragment %q violates the requirement that the first index is not greater than the second index", part)
		}
		if first <= prev {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", prev, first)
		}
		total += int32(last - first + 1)
		prev = last
	}
	return total, nil
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

// validateJobStatus checks the counts of a changed status. Upstream's further rules on
// how conditions, completion time and counts relate are not checked here.
func validateJobStatus(s, old *batchv1.JobStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	var allErrs field.ErrorList
	for _, c := range []struct {
		name  string
		value *int32
	}{{"active", &s.Active}, {"succeeded", &s.Succeeded}, {"failed", &s.Failed}, {"terminating", s.Terminating}, {"ready", s.Ready}} {
		if c.value != nil {
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*c.value), p.Child(c.name))...)
		}
	}
	return allErrs
}

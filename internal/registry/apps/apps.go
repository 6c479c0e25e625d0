// Package apps describes the apps/v1 resources for the apiserver: deployments,
// replicasets, daemonsets, statefulsets and controllerrevisions, with their
// defaulting, validation, field selectors, printing and scale subresources.
package apps

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// Resources returns the apps/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{
		Deployments(),
		ReplicaSets(),
		DaemonSets(),
		StatefulSets(),
		ControllerRevisions(),
	}
}

// Column descriptions shared by the workload printers, worded as upstream.
var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1,
		Description: "Names of each container in the template."}
	imagesColumn = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1,
		Description: "Images referenced by each container in the template."}
)

// containerCells lays out container names and images on one line each, comma separated,
// as the wide columns of the workload printers show them.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, 0, len(containers))
	im := make([]string, 0, len(containers))
	for _, c := range containers {
		n = append(n, c.Name)
		im = append(im, c.Image)
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// selectorString renders a label selector in its string form ("app=web,tier in (a,b)"),
// as the scale subresource and the deployment printer show it.
func selectorString(sel *metav1.LabelSelector) (string, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", err
	}
	return s.String(), nil
}

// scaleSelector is the selector string of a Scale's status: empty when unconvertible.
func scaleSelector(sel *metav1.LabelSelector) string {
	s, err := selectorString(sel)
	if err != nil {
		return ""
	}
	return s
}

// validateRequiredSelector checks that a workload's selector is present, well formed
// and not empty, as apps/v1 requires; kind is the lower-case kind for the message.
func validateRequiredSelector(sel *metav1.LabelSelector, kind string, fldPath *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	allErrs := metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, fldPath)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, sel, "empty selector is invalid for "+kind))
	}
	return allErrs
}

// validateTemplateLabelsMatch reports a template whose labels the selector does not select.
func validateTemplateLabelsMatch(sel labels.Selector, template *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	if sel.Empty() || sel.Matches(labels.Set(template.Labels)) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Child("metadata", "labels"), template.Labels,
		"`selector` does not match template `labels`")}
}

// validateAlwaysRestart checks the rules every long-running workload puts on its pod
// template: restartPolicy Always and no activeDeadlineSeconds. kind names the workload in
// the message, as upstream words it.
func validateAlwaysRestart(spec *corev1.PodSpec, kind string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("restartPolicy"), spec.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("activeDeadlineSeconds"),
			fmt.Sprintf("activeDeadlineSeconds in %s is not Supported", kind)))
	}
	return allErrs
}

// validatePositiveIntOrPercent checks an int-or-string is a non-negative integer or a
// percentage such as "25%".
func validatePositiveIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, *v, msg))
		}
	case intstr.Int:
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)...)
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, *v, "must be an integer or percentage (e.g '5%')"))
	}
	return allErrs
}

// percentValue returns the number of a percentage and whether v is one.
func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String {
		return 0, false
	}
	s := strings.TrimSuffix(v.StrVal, "%")
	if s == v.StrVal {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

// intOrPercentValue is the number in v, whether an integer or a percentage.
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if n, ok := percentValue(*v); ok {
		return n
	}
	return v.IntValue()
}

// validateNotMoreThan100Percent rejects percentages above 100%.
func validateNotMoreThan100Percent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if n, ok := percentValue(*v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, *v, "must not be greater than 100%")}
	}
	return nil
}

// validateNonnegative wraps the generic non-negative check for int32 fields.
func validateNonnegative(v int32, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(int64(v), fldPath)
}

// validateNonnegativePtr is validateNonnegative for an optional field.
func validateNonnegativePtr(v *int32, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return validateNonnegative(*v, fldPath)
}

// replicas reads an optional replica count, 1 when unset as defaulting would make it.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// validateReplicatedTemplate checks the pod template of a replicated workload: the
// selector must select its labels, the template must be a valid pod template, and its
// pods must restart always. kind names the workload in upstream's messages.
func validateReplicatedTemplate(t *corev1.PodTemplateSpec, sel labels.Selector, kind string, fldPath *field.Path) field.ErrorList {
	allErrs := validateTemplateLabelsMatch(sel, t, fldPath)
	allErrs = append(allErrs, core.ValidatePodTemplateSpec(t, fldPath)...)
	return append(allErrs, validateAlwaysRestart(&t.Spec, kind, fldPath.Child("spec"))...)
}

var (
	_ registry.StatusStrategy = deploymentStrategy{}
	_ registry.StatusStrategy = replicaSetStrategy{}
	_ registry.StatusStrategy = statefulSetStrategy{}
	_ registry.StatusStrategy = daemonSetStrategy{}
)

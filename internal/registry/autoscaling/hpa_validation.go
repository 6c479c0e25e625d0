package autoscaling

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateSpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.MinReplicas != nil && *spec.MinReplicas < 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("minReplicas"), *spec.MinReplicas, "must be greater than or equal to 1"))
	}
	if spec.MaxReplicas < 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than 0"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	allErrs = append(allErrs, validateObjectReference(spec.ScaleTargetRef, true, fldPath.Child("scaleTargetRef"))...)
	for i, m := range spec.Metrics {
		allErrs = append(allErrs, validateMetricSpec(m, fldPath.Child("metrics").Index(i))...)
	}
	if b := spec.Behavior; b != nil {
		allErrs = append(allErrs, validateScalingRules(b.ScaleUp, fldPath.Child("behavior", "scaleUp"))...)
		allErrs = append(allErrs, validateScalingRules(b.ScaleDown, fldPath.Child("behavior", "scaleDown"))...)
	}
	return allErrs
}

// validateObjectReference checks a kind/name reference; the scale target's apiVersion
// must also parse.
func validateObjectReference(ref autoscalingv2.CrossVersionObjectReference, checkAPIVersion bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, f := range []struct{ name, value string }{{"kind", ref.Kind}, {"name", ref.Name}} {
		if f.value == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child(f.name), ""))
			continue
		}
		for _, msg := range path.IsValidPathSegmentName(f.value) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(f.name), f.value, msg))
		}
	}
	if checkAPIVersion && ref.APIVersion != "" {
		if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("apiVersion"), ref.APIVersion, err.Error()))
		}
	}
	return allErrs
}

var metricSourceTypes = []autoscalingv2.MetricSourceType{
	autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType,
	autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType,
}

// validateMetricSpec checks one metric: a known type whose source, and only that source,
// is filled in and valid.
func validateMetricSpec(m autoscalingv2.MetricSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	present := map[string]bool{
		"object": m.Object != nil, "pods": m.Pods != nil, "resource": m.Resource != nil,
		"containerResource": m.ContainerResource != nil, "external": m.External != nil,
	}
	var expected string
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected = "object"
		if m.Object != nil {
			allErrs = append(allErrs, validateObjectSource(m.Object, fldPath.Child("object"))...)
		}
	case autoscalingv2.PodsMetricSourceType:
		expected = "pods"
		if m.Pods != nil {
			allErrs = append(allErrs, validatePodsSource(m.Pods, fldPath.Child("pods"))...)
		}
	case autoscalingv2.ResourceMetricSourceType:
		expected = "resource"
		if m.Resource != nil {
			allErrs = append(allErrs, validateResourceTarget(m.Resource.Name, m.Resource.Target, fldPath.Child("resource"))...)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected = "containerResource"
		if c := m.ContainerResource; c != nil {
			p := fldPath.Child("containerResource")
			allErrs = append(allErrs, validateResourceTarget(c.Name, c.Target, p)...)
			if c.Container == "" {
				allErrs = append(allErrs, field.Required(p.Child("container"), "must specify a container"))
			} else {
				for _, msg := range validation.IsDNS1123Label(c.Container) {
					allErrs = append(allErrs, field.Invalid(p.Child("container"), c.Container, msg))
				}
			}
		}
	case autoscalingv2.ExternalMetricSourceType:
		expected = "external"
		if m.External != nil {
			allErrs = append(allErrs, validateExternalSource(m.External, fldPath.Child("external"))...)
		}
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "must specify a metric source type"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), m.Type, metricSourceTypes))
	}
	if expected != "" && !present[expected] {
		allErrs = append(allErrs, field.Required(fldPath.Child(expected), "must populate information for the given metric source"))
	}
	for _, name := range []string{"object", "pods", "resource", "containerResource", "external"} {
		if present[name] && name != expected && expected != "" {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "must populate the given metric source only"))
		}
	}
	return allErrs
}

func validateResourceTarget(name corev1.ResourceName, target autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "must specify a resource name"))
	} else {
		for _, msg := range validation.IsQualifiedName(string(name)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), name, msg))
		}
	}
	tp := fldPath.Child("target")
	allErrs = append(allErrs, validateMetricTarget(target, tp)...)
	if target.AverageUtilization == nil && target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(tp.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if target.AverageUtilization != nil && target.AverageValue != nil {
		allErrs = append(allErrs, field.Forbidden(tp.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return allErrs
}

func validateObjectSource(src *autoscalingv2.ObjectMetricSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateObjectReference(src.DescribedObject, false, fldPath.Child("describedObject"))
	allErrs = append(allErrs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	tp := fldPath.Child("target")
	allErrs = append(allErrs, validateMetricTarget(src.Target, tp)...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(tp.Child("averageValue"), "must set either a target value or averageValue"))
	}
	return allErrs
}

func validateExternalSource(src *autoscalingv2.ExternalMetricSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	tp := fldPath.Child("target")
	allErrs = append(allErrs, validateMetricTarget(src.Target, tp)...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(tp.Child("averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		allErrs = append(allErrs, field.Forbidden(tp.Child("value"), "may not set both a target value for metric and a per-pod target"))
	}
	return allErrs
}

func validatePodsSource(src *autoscalingv2.PodsMetricSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	tp := fldPath.Child("target")
	allErrs = append(allErrs, validateMetricTarget(src.Target, tp)...)
	if src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(tp.Child("averageValue"), "must specify a positive target averageValue"))
	}
	return allErrs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if id.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "must specify a metric name"))
	} else {
		for _, msg := range path.IsValidPathSegmentName(id.Name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), id.Name, msg))
		}
	}
	if id.Selector != nil {
		allErrs = append(allErrs, metavalidation.ValidateLabelSelector(id.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	return allErrs
}

func validateMetricTarget(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if t.Type == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return allErrs
}

func validateScalingRules(rules *autoscalingv2.HPAScalingRules, fldPath *field.Path) field.ErrorList {
	if rules == nil {
		return nil
	}
	var allErrs field.ErrorList
	if w := rules.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
		}
		if *w > maxStabilizationWindowSeconds {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), *w,
				fmt.Sprintf("must be less than or equal to %v", maxStabilizationWindowSeconds)))
		}
	}
	if sp := rules.SelectPolicy; sp != nil && *sp != autoscalingv2.MaxChangePolicySelect && *sp != autoscalingv2.MinChangePolicySelect && *sp != autoscalingv2.DisabledPolicySelect {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("selectPolicy"), *sp, []autoscalingv2.ScalingPolicySelect{
			autoscalingv2.DisabledPolicySelect, autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}))
	}
	pp := fldPath.Child("policies")
	if len(rules.Policies) == 0 {
		allErrs = append(allErrs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, p := range rules.Policies {
		ip := pp.Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			allErrs = append(allErrs, field.NotSupported(ip.Child("type"), p.Type,
				[]autoscalingv2.HPAScalingPolicyType{autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}))
		}
		if p.Value <= 0 {
			allErrs = append(allErrs, field.Invalid(ip.Child("value"), p.Value, "must be greater than zero"))
		}
		if p.PeriodSeconds <= 0 {
			allErrs = append(allErrs, field.Invalid(ip.Child("periodSeconds"), p.PeriodSeconds, "must be greater than zero"))
		}
		if p.PeriodSeconds > maxPeriodSeconds {
			allErrs = append(allErrs, field.Invalid(ip.Child("periodSeconds"), p.PeriodSeconds,
				fmt.Sprintf("must be less than or equal to %v", maxPeriodSeconds)))
		}
	}
	if t := rules.Tolerance; t != nil && t.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("tolerance"), t.String(), "must be greater than or equal to zero"))
	}
	return allErrs
}

// validateStatus checks a changed status, as the HPA controller writes it.
func validateStatus(s, old *autoscalingv2.HorizontalPodAutoscalerStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	allErrs := apivalidation.ValidateNonnegativeField(int64(s.CurrentReplicas), p.Child("currentReplicas"))
	return append(allErrs, apivalidation.ValidateNonnegativeField(int64(s.DesiredReplicas), p.Child("desiredReplicas"))...)
}

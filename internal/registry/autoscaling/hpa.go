package autoscaling

import (
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

const (
	// defaultCPUUtilization is the target of the metric an HPA gets when it names none.
	defaultCPUUtilization = 80
	// maxStabilizationWindowSeconds and maxPeriodSeconds bound the behavior fields.
	maxStabilizationWindowSeconds = 3600
	maxPeriodSeconds              = 1800
)

type hpaStrategy struct{ registry.BaseStrategy }

// Default applies upstream's autoscaling/v2 defaults: one replica at least, 80% CPU when
// no metric is given, and the default scaling rules for any behavior given.
func (hpaStrategy) Default(obj runtime.Object) {
	defaultV2(obj.(*autoscalingv2.HorizontalPodAutoscaler))
}

func defaultV2(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if hpa.Spec.MinReplicas == nil {
		hpa.Spec.MinReplicas = ptr(int32(1))
	}
	if len(hpa.Spec.Metrics) == 0 {
		hpa.Spec.Metrics = []autoscalingv2.MetricSpec{defaultCPUMetric()}
	}
	if b := hpa.Spec.Behavior; b != nil {
		b.ScaleUp = withDefaults(b.ScaleUp, defaultScaleUpRules())
		b.ScaleDown = withDefaults(b.ScaleDown, defaultScaleDownRules())
	}
}

func defaultCPUMetric() autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{
				Type:               autoscalingv2.UtilizationMetricType,
				AverageUtilization: ptr(int32(defaultCPUUtilization)),
			},
		},
	}
}

// defaultScaleUpRules repeat the HPA's historic scale-up limits: 4 pods or 100% per 15s.
func defaultScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr(int32(0)),
		SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// defaultScaleDownRules leave the stabilization window unset: the controller's flag
// decides it.
func defaultScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// withDefaults fills the unset fields of rules from defaults.
func withDefaults(rules, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if rules == nil {
		return defaults
	}
	if rules.SelectPolicy != nil {
		defaults.SelectPolicy = rules.SelectPolicy
	}
	if rules.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = rules.StabilizationWindowSeconds
	}
	if rules.Policies != nil {
		defaults.Policies = rules.Policies
	}
	if rules.Tolerance != nil {
		defaults.Tolerance = rules.Tolerance
	}
	return defaults
}

func (hpaStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*autoscalingv2.HorizontalPodAutoscaler).Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
}

func (hpaStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, field.NewPath("spec"))
}

func (hpaStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, field.NewPath("spec"))
}

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

func hpaPrinter() *registry.Printer {
	spec, status := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc(), autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Reference", Type: "string", Description: spec["scaleTargetRef"]},
			{Name: "Targets", Type: "string", Description: spec["metrics"]},
			{Name: "MinPods", Type: "string", Description: spec["minReplicas"]},
			{Name: "MaxPods", Type: "string", Description: spec["maxReplicas"]},
			{Name: "Replicas", Type: "string", Description: status["currentReplicas"]},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []interface{} {
			hpa, err := asV2(obj)
			if err != nil {
				return []interface{}{"", "", "", "", int64(0), int64(0), ""}
			}
			minPods := "<unset>"
			if hpa.Spec.MinReplicas != nil {
				minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
			}
			ref := hpa.Spec.ScaleTargetRef
			return []interface{}{hpa.Name, ref.Kind + "/" + ref.Name, formatMetrics(hpa.Spec.Metrics, hpa.Status.CurrentMetrics),
				minPods, int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), registry.Age(hpa.CreationTimestamp)}
		},
	}
}

// formatMetrics is the TARGETS cell: "current/target" per metric, two at most.
func formatMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const shown = 2
	var list []string
	quantity := func(q *resource.Quantity) string {
		if q == nil {
			return "<nil>"
		}
		return q.String()
	}
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		current := "<unknown>"
		switch spec.Type {
		case autoscalingv2.ExternalMetricSourceType:
			if spec.External.Target.AverageValue != nil {
				if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
					current = st.External.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.External.Target.AverageValue.String()))
			} else {
				if st != nil && st.External != nil {
					current = quantity(st.External.Current.Value)
				}
				list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.External.Target.Value)))
			}
		case autoscalingv2.PodsMetricSourceType:
			if st != nil && st.Pods != nil {
				current = quantity(st.Pods.Current.AverageValue)
			}
			list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.Pods.Target.AverageValue)))
		case autoscalingv2.ObjectMetricSourceType:
			if spec.Object.Target.AverageValue != nil {
				if st != nil && st.Object != nil && st.Object.Current.AverageValue != nil {
					current = st.Object.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.Object.Target.AverageValue.String()))
			} else {
				if st != nil && st.Object != nil {
					current = quantity(st.Object.Current.Value)
				}
				list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.Object.Target.Value)))
			}
		case autoscalingv2.ResourceMetricSourceType:
			list = append(list, formatResourceMetric(string(spec.Resource.Name), spec.Resource.Target, resourceCurrent(st, false)))
		case autoscalingv2.ContainerResourceMetricSourceType:
			list = append(list, formatResourceMetric(string(spec.ContainerResource.Name), spec.ContainerResource.Target, resourceCurrent(st, true)))
		default:
			list = append(list, "<unknown type>")
		}
	}
	if len(list) > shown {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:shown], ", "), len(list)-shown)
	}
	return strings.Join(list, ", ")
}

// resourceCurrent picks the current value of a (container) resource metric status.
func resourceCurrent(st *autoscalingv2.MetricStatus, container bool) *autoscalingv2.MetricValueStatus {
	switch {
	case st == nil:
		return nil
	case container && st.ContainerResource != nil:
		return &st.ContainerResource.Current
	case !container && st.Resource != nil:
		return &st.Resource.Current
	}
	return nil
}

func formatResourceMetric(name string, target autoscalingv2.MetricTarget, current *autoscalingv2.MetricValueStatus) string {
	cur := "<unknown>"
	if target.AverageValue != nil {
		if current != nil && current.AverageValue != nil {
			cur = current.AverageValue.String()
		}
		return fmt.Sprintf("%s: %s/%s", name, cur, target.AverageValue.String())
	}
	if current != nil && current.AverageUtilization != nil {
		cur = fmt.Sprintf("%d%%", *current.AverageUtilization)
	}
	tgt := "<auto>"
	if target.AverageUtilization != nil {
		tgt = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return fmt.Sprintf("%s: %s/%s", name, cur, tgt)
}

func ptr[T any](v T) *T { return &v }

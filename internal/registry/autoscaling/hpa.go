package autoscaling

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

func (hpaStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	allErrs := validateSpec(&hpa.Spec, field.NewPath("spec"))
	if oldHPA, ok := old.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		allErrs = append(allErrs, validateStatus(&hpa.Status, &oldHPA.Status)...)
	}
	return allErrs
}

func ptr[T any](v T) *T { return &v }

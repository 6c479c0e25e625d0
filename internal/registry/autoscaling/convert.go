package autoscaling

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// The annotations that carry v2-only data on autoscaling/v1 objects, as upstream names
// them. They exist only on v1 objects: converting to v2 consumes and removes them.
const (
	metricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	metricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	conditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	behaviorSpecsAnnotation  = "autoscaling.alpha.kubernetes.io/behavior"
)

var roundTripAnnotations = []string{metricSpecsAnnotation, metricStatusesAnnotation, conditionsAnnotation, behaviorSpecsAnnotation}

// toStorage converts an autoscaling/v1 object to the v2 storage version.
func toStorage(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *autoscalingv1.HorizontalPodAutoscaler:
		return v1ToV2(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return o, nil
	}
	return nil, fmt.Errorf("not a HorizontalPodAutoscaler: %T", obj)
}

// fromStorage converts a stored v2 object to autoscaling/v1.
func fromStorage(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		return v2ToV1(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		return o, nil
	}
	return nil, fmt.Errorf("not a HorizontalPodAutoscaler: %T", obj)
}

// asV2 returns obj as a v2 object, converting a v1 one.
func asV2(obj runtime.Object) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	o, err := toStorage(obj)
	if err != nil {
		return nil, err
	}
	return o.(*autoscalingv2.HorizontalPodAutoscaler), nil
}

// withoutRoundTripAnnotations returns annotations minus the round-trip keys, copying
// only when there is something to drop.
func withoutRoundTripAnnotations(in map[string]string) map[string]string {
	found := false
	for _, k := range roundTripAnnotations {
		if _, ok := in[k]; ok {
			found = true
		}
	}
	if !found {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range roundTripAnnotations {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// v2ToV1 keeps the CPU utilization target and status in v1 fields and everything else
// v1 cannot express in annotations.
func v2ToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	if in.APIVersion != "" || in.Kind != "" {
		out.TypeMeta.APIVersion = autoscalingv1.SchemeGroupVersion.String()
		out.TypeMeta.Kind = "HorizontalPodAutoscaler"
	}
	out.Annotations = withoutRoundTripAnnotations(out.Annotations)
	ref := in.Spec.ScaleTargetRef
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: ref.Kind, Name: ref.Name, APIVersion: ref.APIVersion},
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	var otherMetrics []autoscalingv1.MetricSpec
	cpuSeen := false
	for _, m := range in.Spec.Metrics {
		if isCPUMetric(m) {
			if !cpuSeen && m.Resource.Target.AverageUtilization != nil {
				out.Spec.TargetCPUUtilizationPercentage = ptr(*m.Resource.Target.AverageUtilization)
			}
			cpuSeen = true
			if m.Resource.Target.AverageUtilization != nil {
				continue
			}
		}
		otherMetrics = append(otherMetrics, metricSpecToV1(m))
	}

	st := in.Status
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: st.ObservedGeneration,
		LastScaleTime:      st.LastScaleTime,
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	currentMetrics := make([]autoscalingv1.MetricStatus, 0, len(st.CurrentMetrics))
	for _, m := range st.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptr(*m.Resource.Current.AverageUtilization)
		}
		currentMetrics = append(currentMetrics, metricStatusToV1(m))
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		conditions = append(conditions, autoscalingv1.HorizontalPodAutoscalerCondition{
			Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message, ObservedGeneration: c.ObservedGeneration,
		})
	}

	set := func(key string, v interface{}) error {
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		annotations := make(map[string]string, len(out.Annotations)+1)
		for k, v := range out.Annotations {
			annotations[k] = v
		}
		annotations[key] = string(enc)
		out.Annotations = annotations
		return nil
	}
	if len(otherMetrics) > 0 {
		if err := set(metricSpecsAnnotation, otherMetrics); err != nil {
			return nil, err
		}
	}
	if len(st.CurrentMetrics) > 0 {
		if err := set(metricStatusesAnnotation, currentMetrics); err != nil {
			return nil, err
		}
	}
	if in.Spec.Behavior != nil {
		if err := set(behaviorSpecsAnnotation, behaviorToAnnotation(in.Spec.Behavior)); err != nil {
			return nil, err
		}
	}
	if len(st.Conditions) > 0 {
		if err := set(conditionsAnnotation, conditions); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// v1ToV2 rebuilds the v2 object from the v1 fields and the round-trip annotations,
// which it then removes. An HPA naming no metric at all targets 80% CPU, as v1's
// controller always did.
func v1ToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	if in.APIVersion != "" || in.Kind != "" {
		out.TypeMeta.APIVersion = autoscalingv2.SchemeGroupVersion.String()
		out.TypeMeta.Kind = "HorizontalPodAutoscaler"
	}
	ref := in.Spec.ScaleTargetRef
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: ref.Kind, Name: ref.Name, APIVersion: ref.APIVersion},
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	var cpu []autoscalingv2.MetricSpec
	if in.Spec.TargetCPUUtilizationPercentage != nil {
		m := defaultCPUMetric()
		m.Resource.Target.AverageUtilization = ptr(*in.Spec.TargetCPUUtilizationPercentage)
		cpu = append(cpu, m)
	}
	out.Spec.Metrics = cpu
	if enc, ok := in.Annotations[metricSpecsAnnotation]; ok {
		var other []autoscalingv1.MetricSpec
		if err := json.Unmarshal([]byte(enc), &other); err == nil {
			metrics := make([]autoscalingv2.MetricSpec, 0, len(other)+len(cpu))
			for _, m := range other {
				metrics = append(metrics, metricSpecToV2(m))
			}
			out.Spec.Metrics = append(metrics, cpu...)
		}
	}
	if enc, ok := in.Annotations[behaviorSpecsAnnotation]; ok {
		var b annotationBehavior
		if err := json.Unmarshal([]byte(enc), &b); err == nil && (b.ScaleUp != nil || b.ScaleDown != nil) {
			out.Spec.Behavior = b.toV2()
		}
	}

	st := in.Status
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: st.ObservedGeneration,
		LastScaleTime:      st.LastScaleTime,
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	if st.CurrentCPUUtilizationPercentage != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(*st.CurrentCPUUtilizationPercentage)}},
		}}
	}
	if enc, ok := in.Annotations[metricStatusesAnnotation]; ok {
		var current []autoscalingv1.MetricStatus
		if err := json.Unmarshal([]byte(enc), &current); err == nil {
			out.Status.CurrentMetrics = make([]autoscalingv2.MetricStatus, 0, len(current))
			for _, m := range current {
				out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
			}
		}
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{defaultCPUMetric()}
	}
	if enc, ok := in.Annotations[conditionsAnnotation]; ok {
		var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
		if err := json.Unmarshal([]byte(enc), &conditions); err == nil {
			out.Status.Conditions = make([]autoscalingv2.HorizontalPodAutoscalerCondition, 0, len(conditions))
			for _, c := range conditions {
				out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
					Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
					LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message, ObservedGeneration: c.ObservedGeneration,
				})
			}
		}
	}
	out.Annotations = withoutRoundTripAnnotations(out.Annotations)
	return out, nil
}

func isCPUMetric(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU
}

func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricSource{
			Target:       autoscalingv1.CrossVersionObjectReference{Kind: s.DescribedObject.Kind, Name: s.DescribedObject.Name, APIVersion: s.DescribedObject.APIVersion},
			MetricName:   s.Metric.Name,
			Selector:     s.Metric.Selector,
			AverageValue: s.Target.AverageValue,
		}
		if s.Target.Value != nil {
			out.Object.TargetValue = *s.Target.Value
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: s.Metric.Name, Selector: s.Metric.Selector}
		if s.Target.AverageValue != nil {
			out.Pods.TargetAverageValue = *s.Target.AverageValue
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: s.Name,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			TargetValue: s.Target.Value, TargetAverageValue: s.Target.AverageValue}
	}
	return out
}

// resourceTarget is the v2 target a v1 resource metric's fields describe.
func resourceTarget(utilization *int32, averageValue *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: utilization, AverageValue: averageValue}
	if utilization == nil {
		t.Type = autoscalingv2.AverageValueMetricType
	}
	return t
}

func metricSpecToV2(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(s.TargetValue), AverageValue: s.AverageValue}
		if s.AverageValue != nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: s.Target.Kind, Name: s.Target.Name, APIVersion: s.Target.APIVersion},
			Metric:          autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target:          t,
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(s.TargetAverageValue)},
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: s.Name, Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := m.External; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: s.TargetValue, AverageValue: s.TargetAverageValue}
		if s.TargetValue == nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector},
			Target: t,
		}
	}
	return out
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricStatus{
			Target:       autoscalingv1.CrossVersionObjectReference{Kind: s.DescribedObject.Kind, Name: s.DescribedObject.Name, APIVersion: s.DescribedObject.APIVersion},
			MetricName:   s.Metric.Name,
			Selector:     s.Metric.Selector,
			AverageValue: s.Current.AverageValue,
		}
		if s.Current.Value != nil {
			out.Object.CurrentValue = *s.Current.Value
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: s.Metric.Name, Selector: s.Metric.Selector}
		if s.Current.AverageValue != nil {
			out.Pods.CurrentAverageValue = *s.Current.AverageValue
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: s.Name, CurrentAverageUtilization: s.Current.AverageUtilization}
		if s.Current.AverageValue != nil {
			out.Resource.CurrentAverageValue = *s.Current.AverageValue
		}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			CurrentAverageUtilization: s.Current.AverageUtilization}
		if s.Current.AverageValue != nil {
			out.ContainerResource.CurrentAverageValue = *s.Current.AverageValue
		}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			CurrentAverageValue: s.Current.AverageValue}
		if s.Current.Value != nil {
			out.External.CurrentValue = *s.Current.Value
		}
	}
	return out
}

func metricStatusToV2(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	if s := m.Object; s != nil {
		out.Object = &autoscalingv2.ObjectMetricStatus{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: s.Target.Kind, Name: s.Target.Name, APIVersion: s.Target.APIVersion},
			Metric:          autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current:         autoscalingv2.MetricValueStatus{Value: ptr(s.CurrentValue), AverageValue: s.AverageValue},
		}
	}
	if s := m.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(s.CurrentAverageValue)},
		}
	}
	if s := m.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: s.Name,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: s.CurrentAverageUtilization, AverageValue: ptr(s.CurrentAverageValue)}}
	}
	if s := m.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: s.CurrentAverageUtilization, AverageValue: ptr(s.CurrentAverageValue)}}
	}
	if s := m.External; s != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: ptr(s.CurrentValue), AverageValue: s.CurrentAverageValue},
		}
	}
	return out
}

// annotationBehavior is the shape of the behavior annotation. Upstream marshals its
// internal (untagged) types there, so the keys are Go field names: {"ScaleUp":{...}}.
type annotationBehavior struct {
	ScaleUp   *annotationRules
	ScaleDown *annotationRules
}

type annotationRules struct {
	StabilizationWindowSeconds *int32
	SelectPolicy               *autoscalingv2.ScalingPolicySelect
	Policies                   []annotationPolicy
	Tolerance                  *resource.Quantity
}

type annotationPolicy struct {
	Type          autoscalingv2.HPAScalingPolicyType
	Value         int32
	PeriodSeconds int32
}

func behaviorToAnnotation(b *autoscalingv2.HorizontalPodAutoscalerBehavior) annotationBehavior {
	rules := func(r *autoscalingv2.HPAScalingRules) *annotationRules {
		if r == nil {
			return nil
		}
		out := &annotationRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, annotationPolicy(p))
		}
		return out
	}
	return annotationBehavior{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

func (b annotationBehavior) toV2() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	rules := func(r *annotationRules) *autoscalingv2.HPAScalingRules {
		if r == nil {
			return nil
		}
		out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, autoscalingv2.HPAScalingPolicy(p))
		}
		return out
	}
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

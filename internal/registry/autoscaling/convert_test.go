package autoscaling

import (
	"context"
	"reflect"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newV1HPA() *autoscalingv1.HorizontalPodAutoscaler {
	return &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"team": "web"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr(int32(2)),
			MaxReplicas:    5,
		},
	}
}

func TestV1ToV2CPUTarget(t *testing.T) {
	tests := []struct {
		name    string
		cpu     *int32
		wantCPU int32
	}{
		{"explicit target", ptr(int32(50)), 50},
		{"no target gets 80%", nil, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newV1HPA()
			in.Spec.TargetCPUUtilizationPercentage = tt.cpu
			v2, err := toStorage(in)
			if err != nil {
				t.Fatal(err)
			}
			h := v2.(*autoscalingv2.HorizontalPodAutoscaler)
			want := defaultCPUMetric()
			want.Resource.Target.AverageUtilization = ptr(tt.wantCPU)
			if !reflect.DeepEqual(h.Spec.Metrics, []autoscalingv2.MetricSpec{want}) {
				t.Errorf("metrics = %+v", h.Spec.Metrics)
			}
			if !reflect.DeepEqual(h.Annotations, map[string]string{"team": "web"}) {
				t.Errorf("annotations = %v", h.Annotations)
			}
			back, err := fromStorage(h)
			if err != nil {
				t.Fatal(err)
			}
			b := back.(*autoscalingv1.HorizontalPodAutoscaler)
			if b.Spec.TargetCPUUtilizationPercentage == nil || *b.Spec.TargetCPUUtilizationPercentage != tt.wantCPU {
				t.Errorf("targetCPU = %v", b.Spec.TargetCPUUtilizationPercentage)
			}
			if !reflect.DeepEqual(b.Annotations, map[string]string{"team": "web"}) {
				t.Errorf("v1 annotations = %v", b.Annotations)
			}
		})
	}
}

// fullV2 uses every part of v2 that v1 cannot express.
func fullV2() *autoscalingv2.HorizontalPodAutoscaler {
	now := metav1.NewTime(time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC))
	h := newHPA()
	h.Annotations = map[string]string{"team": "web"}
	h.Spec.MinReplicas = ptr(int32(1))
	h.Spec.Metrics = []autoscalingv2.MetricSpec{memoryMetric("100Mi"), defaultCPUMetric()}
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultScaleUpRules(), ScaleDown: defaultScaleDownRules()}
	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 3, DesiredReplicas: 4, LastScaleTime: &now, ObservedGeneration: ptr(int64(2)),
		CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceMemory,
				Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(resource.MustParse("90Mi"))}}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(61)), AverageValue: ptr(resource.MustParse("120m"))}}},
		},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "ReadyForNewScale", Message: "ok"},
		},
	}
	return h
}

func TestV2ToV1Annotations(t *testing.T) {
	v1, err := v2ToV1(fullV2())
	if err != nil {
		t.Fatal(err)
	}
	if v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 80 ||
		v1.Status.CurrentCPUUtilizationPercentage == nil || *v1.Status.CurrentCPUUtilizationPercentage != 61 ||
		v1.Status.CurrentReplicas != 3 || v1.Status.DesiredReplicas != 4 {
		t.Errorf("v1 = %+v", v1)
	}
	want := map[string]string{
		"team": "web",
		"autoscaling.alpha.kubernetes.io/metrics": `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]`,
		"autoscaling.alpha.kubernetes.io/current-metrics": `[{"type":"Resource","resource":{"name":"memory","currentAverageValue":"90Mi"}},` +
			`{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":61,"currentAverageValue":"120m"}}]`,
		"autoscaling.alpha.kubernetes.io/conditions": `[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-11-30T01:00:00Z","reason":"ReadyForNewScale","message":"ok"}]`,
		"autoscaling.alpha.kubernetes.io/behavior": `{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},` +
			`"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}`,
	}
	for k, v := range want {
		if v1.Annotations[k] != v {
			t.Errorf("annotation %s =\n%s\nwant\n%s", k, v1.Annotations[k], v)
		}
	}
	if len(v1.Annotations) != len(want) {
		t.Errorf("annotations = %v", v1.Annotations)
	}
}

func TestV2RoundTripThroughV1(t *testing.T) {
	in := fullV2()
	v1, err := fromStorage(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := toStorage(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(out, in) {
		t.Errorf("round trip changed the object:\n got %+v\nwant %+v", out, in)
	}
}

func TestV1RoundTripThroughV2(t *testing.T) {
	in := newV1HPA()
	in.Spec.TargetCPUUtilizationPercentage = ptr(int32(70))
	in.Status = autoscalingv1.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2, CurrentCPUUtilizationPercentage: ptr(int32(40))}
	v2, err := toStorage(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fromStorage(v2)
	if err != nil {
		t.Fatal(err)
	}
	o := out.(*autoscalingv1.HorizontalPodAutoscaler)
	// The v1 view gains the current-metrics annotation that now records the CPU status.
	if o.Annotations[metricStatusesAnnotation] != `[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":40,"currentAverageValue":"0"}}]` {
		t.Errorf("current-metrics annotation = %q", o.Annotations[metricStatusesAnnotation])
	}
	delete(o.Annotations, metricStatusesAnnotation)
	if !equality.Semantic.DeepEqual(o, in) {
		t.Errorf("round trip changed the object:\n got %+v\nwant %+v", o, in)
	}
}

func TestV1DropsForeignRoundTripAnnotations(t *testing.T) {
	in := newV1HPA()
	in.Annotations[metricSpecsAnnotation] = "not json"
	h, err := asV2(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Annotations[metricSpecsAnnotation]; ok || len(h.Spec.Metrics) != 1 || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("v2 = %+v", h)
	}
}

func TestV1Strategy(t *testing.T) {
	ctx := context.Background()
	s := HorizontalPodAutoscalersV1().Strategy

	h := newV1HPA()
	h.Spec.MinReplicas = nil
	h.Status.CurrentReplicas = 9
	s.Default(h)
	s.PrepareForCreate(ctx, h)
	if errs := s.Validate(ctx, h); len(errs) != 0 {
		t.Fatalf("valid v1 HPA rejected: %v", errs)
	}
	if *h.Spec.MinReplicas != 1 || h.Status.CurrentReplicas != 0 || *h.Spec.TargetCPUUtilizationPercentage != 80 {
		t.Errorf("v1 after create steps = %+v", h)
	}

	bad := newV1HPA()
	bad.Spec.TargetCPUUtilizationPercentage = ptr(int32(0))
	bad.Spec.MaxReplicas = 1
	s.Default(bad)
	checkErrors(t, s.Validate(ctx, bad), []wantError{
		{"spec.metrics[0].resource.target.averageUtilization", field.ErrorTypeInvalid},
		{"spec.maxReplicas", field.ErrorTypeInvalid},
	})
}

func TestV1UpdateKeepsStatusAnnotations(t *testing.T) {
	stored, err := v2ToV1(fullV2())
	if err != nil {
		t.Fatal(err)
	}
	// The client read the object long ago: its copy has stale status annotations.
	update := stored.DeepCopy()
	update.Annotations[metricStatusesAnnotation] = `[]`
	delete(update.Annotations, conditionsAnnotation)
	update.Spec.MaxReplicas = 20
	HorizontalPodAutoscalersV1().Strategy.PrepareForUpdate(context.Background(), update, stored)
	for _, key := range []string{metricStatusesAnnotation, conditionsAnnotation} {
		if update.Annotations[key] != stored.Annotations[key] {
			t.Errorf("%s = %q, want the stored %q", key, update.Annotations[key], stored.Annotations[key])
		}
	}
	if update.Spec.MaxReplicas != 20 || update.Annotations["team"] != "web" {
		t.Errorf("update = %+v", update)
	}
}

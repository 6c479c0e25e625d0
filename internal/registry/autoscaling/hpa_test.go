package autoscaling

import (
	"context"
	"reflect"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    10,
		},
	}
}

func memoryMetric(avg string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse(avg))}}}
}

func TestHPAIdentity(t *testing.T) {
	for _, r := range Resources() {
		if r.Resource != "horizontalpodautoscalers" || r.Kind != "HorizontalPodAutoscaler" || r.SingularName != "horizontalpodautoscaler" ||
			!reflect.DeepEqual(r.ShortNames, []string{"hpa"}) || !reflect.DeepEqual(r.Categories, []string{"all"}) || !r.HasStatus || !r.Namespaced {
			t.Errorf("%s identity = %+v", r.GroupVersion, r)
		}
	}
	v1 := HorizontalPodAutoscalersV1()
	if v1.GroupVersion.String() != "autoscaling/v1" || v1.StorageResource == nil || v1.StorageResource.String() != "horizontalpodautoscalers.autoscaling" ||
		v1.ToStorage == nil || v1.FromStorage == nil {
		t.Errorf("v1 = %+v", v1)
	}
	if _, ok := v1.New().(*autoscalingv1.HorizontalPodAutoscaler); !ok {
		t.Error("v1 New is not a v1 HPA")
	}
	if HorizontalPodAutoscalersV2().StorageResource != nil {
		t.Error("v2 is the storage version and must not name another")
	}
}

func TestHPADefaults(t *testing.T) {
	h := newHPA()
	HorizontalPodAutoscalersV2().Strategy.Default(h)
	if *h.Spec.MinReplicas != 1 || !reflect.DeepEqual(h.Spec.Metrics, []autoscalingv2.MetricSpec{defaultCPUMetric()}) ||
		*h.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("spec = %+v", h.Spec)
	}
	if h.Spec.Behavior != nil {
		t.Errorf("behavior defaulted without being asked: %+v", h.Spec.Behavior)
	}

	// A partly given behavior is completed from the default rules.
	b := newHPA()
	b.Spec.Metrics = []autoscalingv2.MetricSpec{memoryMetric("100Mi")}
	b.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(60))}}
	HorizontalPodAutoscalersV2().Strategy.Default(b)
	want := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr(int32(0)),
			SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr(int32(60)),
			SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
		},
	}
	if !reflect.DeepEqual(b.Spec.Behavior, want) {
		t.Errorf("behavior = %+v / %+v", b.Spec.Behavior.ScaleUp, b.Spec.Behavior.ScaleDown)
	}
	if len(b.Spec.Metrics) != 1 || b.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory {
		t.Errorf("given metrics replaced: %+v", b.Spec.Metrics)
	}
}

func TestHPAPrepareForCreate(t *testing.T) {
	h := newHPA()
	h.Status.CurrentReplicas = 3
	HorizontalPodAutoscalersV2().Strategy.PrepareForCreate(context.Background(), h)
	if !reflect.DeepEqual(h.Status, autoscalingv2.HorizontalPodAutoscalerStatus{}) {
		t.Errorf("status = %+v", h.Status)
	}
}

func TestHPAValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscaler)
		want   []wantError
	}{
		{"valid", func(*autoscalingv2.HorizontalPodAutoscaler) {}, nil},
		{"min above max", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr(int32(11)) },
			[]wantError{{"spec.maxReplicas", field.ErrorTypeInvalid}}},
		{"zero max", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 0 },
			[]wantError{{"spec.maxReplicas", field.ErrorTypeInvalid}, {"spec.maxReplicas", field.ErrorTypeInvalid}}},
		{"zero min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr(int32(0)) },
			[]wantError{{"spec.minReplicas", field.ErrorTypeInvalid}}},
		{"no target", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{}
		},
			[]wantError{{"spec.scaleTargetRef.kind", field.ErrorTypeRequired}, {"spec.scaleTargetRef.name", field.ErrorTypeRequired}}},
		{"bad target name", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Name = "a/b" },
			[]wantError{{"spec.scaleTargetRef.name", field.ErrorTypeInvalid}}},
		{"zero utilization", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{defaultCPUMetric()}
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptr(int32(0))
		}, []wantError{{"spec.metrics[0].resource.target.averageUtilization", field.ErrorTypeInvalid}}},
		{"resource without target", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}}}}
		}, []wantError{{"spec.metrics[0].resource.target.averageUtilization", field.ErrorTypeRequired}}},
		{"type without source", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType}}
		}, []wantError{{"spec.metrics[0].pods", field.ErrorTypeRequired}}},
		{"two sources", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			m := memoryMetric("1Gi")
			m.Pods = &autoscalingv2.PodsMetricSource{}
			h.Spec.Metrics = []autoscalingv2.MetricSpec{m}
		}, []wantError{{"spec.metrics[0].pods", field.ErrorTypeForbidden}}},
		{"unknown type", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "Weather"}}
		}, []wantError{{"spec.metrics[0].type", field.ErrorTypeNotSupported}}},
		{"pods metric", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse("-1"))}}}}
		}, []wantError{{"spec.metrics[0].pods.target.averageValue", field.ErrorTypeInvalid}}},
		{"external both targets", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(resource.MustParse("3")), AverageValue: ptr(resource.MustParse("1"))}}}}
		}, []wantError{{"spec.metrics[0].external.target.value", field.ErrorTypeForbidden}}},
		{"container resource without container", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ContainerResourceMetricSourceType,
				ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(50))}}}}
		}, []wantError{{"spec.metrics[0].containerResource.container", field.ErrorTypeRequired}}},
		{"bad behavior", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr(int32(4000)),
				SelectPolicy:               ptr(autoscalingv2.ScalingPolicySelect("Random")),
				Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 0, PeriodSeconds: 2000}},
			}}
		}, []wantError{
			{"spec.behavior.scaleUp.stabilizationWindowSeconds", field.ErrorTypeInvalid},
			{"spec.behavior.scaleUp.selectPolicy", field.ErrorTypeNotSupported},
			{"spec.behavior.scaleUp.policies[0].value", field.ErrorTypeInvalid},
			{"spec.behavior.scaleUp.policies[0].periodSeconds", field.ErrorTypeInvalid},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHPA()
			tt.mutate(h)
			checkErrors(t, createErrors(h), tt.want)
		})
	}
}

func TestHPAStatusValidation(t *testing.T) {
	ctx := context.Background()
	old := newHPA()
	HorizontalPodAutoscalersV2().Strategy.Default(old)
	updated := old.DeepCopy()
	updated.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: -1, DesiredReplicas: 2}
	checkErrors(t, HorizontalPodAutoscalersV2().Strategy.ValidateUpdate(ctx, updated, old),
		[]wantError{{"status.currentReplicas", field.ErrorTypeInvalid}})

	// The v1 resource judges the status it converts to.
	v1New, err := v2ToV1(updated)
	if err != nil {
		t.Fatal(err)
	}
	v1Old, err := v2ToV1(old)
	if err != nil {
		t.Fatal(err)
	}
	checkErrors(t, HorizontalPodAutoscalersV1().Strategy.ValidateUpdate(ctx, v1New, v1Old),
		[]wantError{{"status.currentReplicas", field.ErrorTypeInvalid}})
}

func TestHPAPrinter(t *testing.T) {
	p := HorizontalPodAutoscalersV2().Printer
	var names []string
	for _, c := range p.Columns {
		names = append(names, c.Name)
	}
	if !reflect.DeepEqual(names, []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}) {
		t.Errorf("columns = %v", names)
	}
	h := newHPA()
	HorizontalPodAutoscalersV2().Strategy.Default(h)
	if got := p.Row(h)[:6]; !reflect.DeepEqual(got, []interface{}{"web", "Deployment/web", "cpu: <unknown>/80%", "1", int64(10), int64(0)}) {
		t.Errorf("row = %#v", got)
	}

	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, CurrentMetrics: []autoscalingv2.MetricStatus{{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(35))}},
	}}}
	// The v1 resource prints v1 objects the same way.
	v1, err := v2ToV1(h)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"web", "Deployment/web", "cpu: 35%/80%", "1", int64(10), int64(2)}
	for name, got := range map[string][]interface{}{"v2": p.Row(h)[:6], "v1": HorizontalPodAutoscalersV1().Printer.Row(v1)[:6]} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s row = %#v, want %#v", name, got, want)
		}
	}

	h.Spec.Metrics = append(h.Spec.Metrics, memoryMetric("200Mi"), memoryMetric("300Mi"))
	if got := p.Row(h)[2]; got != "cpu: 35%/80%, memory: <unknown>/200Mi + 1 more..." {
		t.Errorf("targets = %q", got)
	}
}

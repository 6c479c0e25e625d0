package autoscaling_test

import (
	"context"
	"reflect"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

func TestHPAVersionsAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	target := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

	t.Run("v1 create, v2 read", func(t *testing.T) {
		_, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "v1made"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MaxReplicas:                    5,
				TargetCPUUtilizationPercentage: ptr(int32(50)),
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "v1made", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *h.Spec.MinReplicas != 1 || len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU ||
			*h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 || len(h.Annotations) != 0 {
			t.Errorf("v2 view = %+v", h)
		}
	})

	t.Run("v2 create, v1 read", func(t *testing.T) {
		_, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "v2made"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MaxReplicas: 5,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse("100Mi"))}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "v2made", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"autoscaling.alpha.kubernetes.io/metrics": `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]`}
		if h.Spec.TargetCPUUtilizationPercentage != nil || !reflect.DeepEqual(h.Annotations, want) {
			t.Errorf("v1 view = %+v", h)
		}

		// A v1 client updating the spec keeps the v2-only metric.
		h.Spec.MaxReplicas = 8
		if _, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Update(ctx, h, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		v2, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "v2made", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v2.Spec.MaxReplicas != 8 || len(v2.Spec.Metrics) != 1 || v2.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory {
			t.Errorf("v2 after v1 update = %+v", v2.Spec)
		}
	})

	t.Run("v1 validation speaks v2 paths", func(t *testing.T) {
		_, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
				MinReplicas:    ptr(int32(3)), MaxReplicas: 2,
			},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("error = %v", err)
		}
		causes := err.(apierrors.APIStatus).Status().Details.Causes
		if len(causes) != 1 || causes[0].Field != "spec.maxReplicas" {
			t.Errorf("causes = %+v", causes)
		}
	})
}

func ptr[T any](v T) *T { return &v }

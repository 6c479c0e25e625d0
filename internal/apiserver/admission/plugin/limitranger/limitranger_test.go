package limitranger

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func TestConstraints(t *testing.T) {
	q := resource.MustParse
	store := admissiontest.New(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Min: corev1.ResourceList{corev1.ResourceMemory: q("10Mi")}, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		{Type: corev1.LimitTypePersistentVolumeClaim, Max: corev1.ResourceList{corev1.ResourceStorage: q("5Gi")}},
	}}})
	p := New(store)
	pod := func(res corev1.ResourceRequirements) *admission.Attributes {
		return &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "ns", Name: "p",
			Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: res}}}}}
	}
	tests := []struct {
		name string
		a    *admission.Attributes
		want string
	}{
		{"within", pod(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("20Mi"), corev1.ResourceCPU: q("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("20Mi"), corev1.ResourceCPU: q("200m")}}), ""},
		{"ratio and min", pod(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Mi"), corev1.ResourceCPU: q("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("20Mi"), corev1.ResourceCPU: q("500m")}}),
			`pods "p" is forbidden: [minimum memory usage per Container is 10Mi, but request is 1Mi, cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000]`},
		{"claim", &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), Namespace: "ns", Name: "c",
			Object: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q("10Gi")}}}}},
			`persistentvolumeclaims "c" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi`},
	}
	for _, tt := range tests {
		err := p.Validate(context.Background(), tt.a)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

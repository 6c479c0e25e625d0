package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResourceQuotaValidate(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.ResourceQuotaSpec
		want []string
	}{
		{"valid", corev1.ResourceQuotaSpec{Hard: rl("pods", "10", "requests.cpu", "4", "count/deployments.apps", "5")}, nil},
		{"negative", corev1.ResourceQuotaSpec{Hard: rl("pods", "-1")},
			[]string{`spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"unknown resource", corev1.ResourceQuotaSpec{Hard: rl("gpus", "1")},
			[]string{`spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota`}},
		{"bad scope", corev1.ResourceQuotaSpec{Hard: rl("pods", "1"), Scopes: []corev1.ResourceQuotaScope{"Short"}},
			[]string{`spec.scopes[0]: Unsupported value: "Short": supported values: "BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass", "Terminating", "VolumeAttributesClass"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: tc.spec}
			assertErrors(t, resourceQuotasResource().Strategy.Validate(context.Background(), q), tc.want)
		})
	}
}

func TestResourceQuotaCreateClearsStatus(t *testing.T) {
	q := &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Used: rl("pods", "3")}}
	resourceQuotasResource().Strategy.PrepareForCreate(context.Background(), q)
	if len(q.Status.Used) != 0 {
		t.Errorf("status.used = %v on create, want empty", q.Status.Used)
	}
}

func TestResourceQuotaPrinter(t *testing.T) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"}, Status: corev1.ResourceQuotaStatus{
		Hard: rl("requests.cpu", "4", "pods", "10", "limits.memory", "8Gi", "limits.cpu", "8"),
		Used: rl("requests.cpu", "500m", "pods", "2", "limits.cpu", "1"),
	}}
	assertRow(t, resourceQuotasResource().Printer.Row(q), []interface{}{"compute",
		"pods: 2/10, requests.cpu: 500m/4", "limits.cpu: 1/8, limits.memory: 0/8Gi", "<unknown>"})
}

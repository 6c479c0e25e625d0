package util

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTargetPortOf(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080},
			{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
		}}},
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}}},
			{Name: "setup", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 9999}}},
		},
	}}
	tests := []struct {
		port   corev1.ServicePort
		want   int32
		wantOK bool
	}{
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9090)}, 9090, true},
		{corev1.ServicePort{Port: 80}, 80, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http")}, 8080, true},
		{corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}, 5353, true},
		{corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns")}, 0, false},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("proxy")}, 15001, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("setup")}, 0, false},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("missing")}, 0, false},
	}
	for _, tt := range tests {
		got, ok := TargetPortOf(pod, tt.port)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("targetPort %s/%s: got %d,%v want %d,%v", tt.port.TargetPort.String(), tt.port.Protocol, got, ok, tt.want, tt.wantOK)
		}
	}
}

package apps

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/registry/registrytest"
)

// webTemplate is a minimal valid pod template labelled app=web.
func webTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "nginx", Image: "nginx:1.27"},
			{Name: "sidecar", Image: "busybox"},
		}},
	}
}

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

// The shared assertions of registrytest, under the names this package's tests use.
type wantError = registrytest.WantError

var (
	createErrors = registrytest.CreateErrors
	updateErrors = registrytest.UpdateErrors
	checkErrors  = registrytest.CheckErrors
	checkRow     = registrytest.CheckRow
	columnNames  = registrytest.ColumnNames
)

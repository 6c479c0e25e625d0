package batch

import (
	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/registry/registrytest"
)

// piTemplate is a minimal valid job pod template.
func piTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"}}},
	}}
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

package core

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

func serviceAccountsResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "serviceaccounts",
		Kind:         "ServiceAccount",
		SingularName: "serviceaccount",
		Namespaced:   true,
		ShortNames:   []string{"sa"},
		New:          func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:      func() runtime.Object { return &corev1.ServiceAccountList{} },
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
			registry.AgeColumn,
		}, func(sa *corev1.ServiceAccount) []interface{} {
			return []interface{}{sa.Name, int64(len(sa.Secrets)), registry.Age(sa.CreationTimestamp)}
		}),
	}
}

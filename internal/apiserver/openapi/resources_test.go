package openapi

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// testResources is a representative set: a namespaced resource with status and
// scale, a namespaced one with status only, a cluster-scoped one and a core resource
// with neither.
func testResources() []*registry.Resource {
	scale := &registry.ScaleAdapter{
		Get: func(runtime.Object) (int32, int32, string) { return 0, 0, "" },
		Set: func(runtime.Object, int32) {},
	}
	return []*registry.Resource{
		{GroupVersion: schema.GroupVersion{Group: "apps", Version: "v1"}, Resource: "deployments", Kind: "Deployment",
			SingularName: "deployment", Namespaced: true, ShortNames: []string{"deploy"},
			New: func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
			HasStatus: true, Scale: scale},
		{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "pods", Kind: "Pod", SingularName: "pod",
			Namespaced: true, ShortNames: []string{"po"},
			New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
			HasStatus: true},
		{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "nodes", Kind: "Node", SingularName: "node",
			ShortNames: []string{"no"},
			New:        func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} },
			HasStatus: true},
		{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "configmaps", Kind: "ConfigMap",
			SingularName: "configmap", Namespaced: true, ShortNames: []string{"cm"},
			New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} }},
	}
}

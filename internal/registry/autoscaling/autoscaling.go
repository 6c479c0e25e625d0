// Package autoscaling describes horizontalpodautoscalers for the apiserver: stored as
// autoscaling/v2 and also served as autoscaling/v1 from the same storage, converted the
// way upstream converts them (v2-only data rides in annotations on v1 objects).
package autoscaling

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// Resources returns horizontalpodautoscalers at autoscaling/v2 (the storage version)
// and autoscaling/v1.
func Resources() []*registry.Resource {
	return []*registry.Resource{HorizontalPodAutoscalersV2(), HorizontalPodAutoscalersV1()}
}

// HorizontalPodAutoscalersV2 describes autoscaling/v2 horizontalpodautoscalers.
func HorizontalPodAutoscalersV2() *registry.Resource {
	return &registry.Resource{
		GroupVersion:    autoscalingv2.SchemeGroupVersion,
		Resource:        "horizontalpodautoscalers",
		Kind:            "HorizontalPodAutoscaler",
		SingularName:    "horizontalpodautoscaler",
		Namespaced:      true,
		ShortNames:      []string{"hpa"},
		Categories:      []string{"all"},
		ValidateName:    apivalidation.NameIsDNSSubdomain,
		New:             func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:         func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Strategy:        hpaStrategy{},
		Printer:         hpaPrinter(),
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
	}
}

// HorizontalPodAutoscalersV1 describes autoscaling/v1 horizontalpodautoscalers, served
// from the v2 storage.
func HorizontalPodAutoscalersV1() *registry.Resource {
	r := HorizontalPodAutoscalersV2()
	r.GroupVersion = autoscalingv1.SchemeGroupVersion
	r.New = func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} }
	r.NewList = func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} }
	r.Strategy = hpaV1Strategy{}
	r.StorageResource = &schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
	r.ToStorage = func(obj runtime.Object) (runtime.Object, error) {
		return toStorage(obj)
	}
	r.FromStorage = func(obj runtime.Object) (runtime.Object, error) {
		return fromStorage(obj)
	}
	return r
}

// Package node describes the node.k8s.io/v1 runtimeclasses resource: the container
// runtime configurations (a CRI handler, a pod overhead, scheduling constraints) a pod
// may ask for by name, with validation and printing as upstream's.
package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// Resources returns the node.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{runtimeClasses()}
}

// runtimeClasses is node.k8s.io/v1 runtimeclasses. The RuntimeClass admission plugin
// applies a class's overhead and scheduling to the pods naming it; the kubelet hands
// its handler to the runtime.
func runtimeClasses() *registry.Resource {
	doc := nodev1.RuntimeClass{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: nodev1.SchemeGroupVersion,
		Resource:     "runtimeclasses",
		Kind:         "RuntimeClass",
		SingularName: "runtimeclass",
		New:          func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:      func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Strategy:     runtimeClassStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Handler", Type: "string", Description: doc["handler"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				rc := obj.(*nodev1.RuntimeClass)
				return []interface{}{rc.Name, rc.Handler, registry.Age(rc.CreationTimestamp)}
			},
		},
	}
}

type runtimeClassStrategy struct{ registry.BaseStrategy }

// Validate checks a class as upstream does: the handler is a DNS label (it names a
// runtime configuration of the CRI), the overhead a list of resources, the scheduling
// a node selector and tolerations as a pod's.
func (runtimeClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	rc := obj.(*nodev1.RuntimeClass)
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(rc.Handler) {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
	}
	if rc.Overhead != nil {
		errs = append(errs, core.ValidateResourceList(rc.Overhead.PodFixed, field.NewPath("overhead", "podFixed"))...)
	}
	if s := rc.Scheduling; s != nil {
		path := field.NewPath("scheduling")
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, path.Child("nodeSelector"))...)
		errs = append(errs, core.ValidateTolerations(s.Tolerations, path.Child("tolerations"))...)
		errs = append(errs, validateUniqueTolerations(s.Tolerations, path.Child("tolerations"))...)
	}
	return errs
}

// validateUniqueTolerations refuses a toleration listed twice, which upstream's
// RuntimeClass validation does (a pod's list may repeat one).
func validateUniqueTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	type key struct {
		key      string
		operator corev1.TolerationOperator
		value    string
		effect   corev1.TaintEffect
	}
	seen := map[key]bool{}
	var errs field.ErrorList
	for i, t := range tolerations {
		k := key{t.Key, t.Operator, t.Value, t.Effect}
		if seen[k] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), t))
		}
		seen[k] = true
	}
	return errs
}

// ValidateUpdate: the handler is fixed once created.
func (s runtimeClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	rc, oldRC := obj.(*nodev1.RuntimeClass), old.(*nodev1.RuntimeClass)
	errs := s.Validate(ctx, obj)
	if rc.Handler != oldRC.Handler {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, "field is immutable"))
	}
	return errs
}

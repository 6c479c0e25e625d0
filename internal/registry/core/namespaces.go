package core

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func namespacesResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "namespaces",
		Kind:         "Namespace",
		SingularName: "namespace",
		ShortNames:   []string{"ns"},
		ValidateName: apivalidation.NameIsDNSLabel,
		New:          func() runtime.Object { return &corev1.Namespace{} },
		NewList:      func() runtime.Object { return &corev1.NamespaceList{} },
		Strategy: strategy[*corev1.Namespace]{
			defaults:      defaultNamespace,
			prepareCreate: prepareNamespaceForCreate,
			prepareUpdate: prepareNamespaceForUpdate,
			validate:      validateNamespace,
		},
		Fields: func(obj runtime.Object) fields.Set {
			ns, ok := obj.(*corev1.Namespace)
			if !ok {
				return nil
			}
			return fields.Set{"status.phase": string(ns.Status.Phase)}
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Status", "string", "The status of the namespace"),
			registry.AgeColumn,
		}, func(ns *corev1.Namespace) []interface{} {
			return []interface{}{ns.Name, string(ns.Status.Phase), registry.Age(ns.CreationTimestamp)}
		}),
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
	}
}

// defaultNamespace labels the namespace with its own name and defaults its phase.
func defaultNamespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// prepareNamespaceForCreate makes a new namespace Active and adds the "kubernetes"
// finalizer that the namespace controller removes once the contents are gone.
func prepareNamespaceForCreate(_ context.Context, ns *corev1.Namespace) {
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			defaultNamespace(ns)
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	// The name may have been generated after Default ran.
	defaultNamespace(ns)
}

// prepareNamespaceForUpdate keeps the namespace's spec (its finalizers): as upstream,
// only the finalize subresource changes them.
func prepareNamespaceForUpdate(_ context.Context, ns, old *corev1.Namespace) {
	ns.Spec = *old.Spec.DeepCopy()
}

func validateNamespace(_ context.Context, ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return errs
}

// validateFinalizerName accepts a qualified name; an unqualified one must be one of
// the standard finalizers.
func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, fldPath)
	if !strings.Contains(name, "/") {
		switch name {
		case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		default:
			errs = append(errs, field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

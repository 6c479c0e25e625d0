package networking

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// maxControllerLength is upstream's limit on spec.controller.
const maxControllerLength = 250

func ingressClasses() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "ingressclasses",
		Kind:         "IngressClass",
		SingularName: "ingressclass",
		New:          func() runtime.Object { return &networkingv1.IngressClass{} },
		NewList:      func() runtime.Object { return &networkingv1.IngressClassList{} },
		Strategy:     ingressClassStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Controller", Type: "string", Description: "Controller that is responsible for handling this class"},
				{Name: "Parameters", Type: "string", Description: "A reference to a resource with additional parameters"},
				registry.AgeColumn,
			},
			Row: printIngressClass,
		},
	}
}

type ingressClassStrategy struct{ registry.BaseStrategy }

func (ingressClassStrategy) Default(obj runtime.Object) {
	ic := obj.(*networkingv1.IngressClass)
	if ic.Spec.Parameters != nil && ic.Spec.Parameters.Scope == nil {
		scope := networkingv1.IngressClassParametersReferenceScopeCluster
		ic.Spec.Parameters.Scope = &scope
	}
}

func (ingressClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateIngressClassSpec(&obj.(*networkingv1.IngressClass).Spec, field.NewPath("spec"))
}

func (ingressClassStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ic, oldIC := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass)
	allErrs := apimachineryvalidation.ValidateImmutableField(ic.Spec.Controller, oldIC.Spec.Controller, field.NewPath("spec", "controller"))
	return append(allErrs, validateIngressClassSpec(&ic.Spec, field.NewPath("spec"))...)
}

var supportedParameterScopes = []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}

func validateIngressClassSpec(spec *networkingv1.IngressClassSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.Controller) > maxControllerLength {
		allErrs = append(allErrs, field.TooLong(fldPath.Child("controller"), spec.Controller, maxControllerLength))
	}
	allErrs = append(allErrs, validation.IsDomainPrefixedPath(fldPath.Child("controller"), spec.Controller)...)
	params := spec.Parameters
	if params == nil {
		return allErrs
	}
	paramsPath := fldPath.Child("parameters")
	allErrs = append(allErrs, validateTypedReference(params.APIGroup, params.Kind, params.Name, paramsPath)...)
	if params.Scope == nil {
		return append(allErrs, field.Required(paramsPath.Child("scope"), ""))
	}
	switch *params.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			allErrs = append(allErrs, field.Required(paramsPath.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range apimachineryvalidation.NameIsDNSLabel(*params.Namespace, false) {
				allErrs = append(allErrs, field.Invalid(paramsPath.Child("namespace"), *params.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			allErrs = append(allErrs, field.Forbidden(paramsPath.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(paramsPath.Child("scope"), *params.Scope, supportedParameterScopes))
	}
	return allErrs
}

func printIngressClass(obj runtime.Object) []interface{} {
	ic := obj.(*networkingv1.IngressClass)
	parameters := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		parameters = p.Kind
		if p.APIGroup != nil {
			parameters += "." + *p.APIGroup
		}
		parameters += "/" + p.Name
	}
	return []interface{}{ic.Name, ic.Spec.Controller, parameters, registry.Age(ic.CreationTimestamp)}
}

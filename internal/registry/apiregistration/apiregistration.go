// Package apiregistration describes the apiregistration.k8s.io/v1 apiservices
// resource: which server serves each API group version.
package apiregistration

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/registry"
)

// Upstream's bounds on the two priorities.
const (
	maxGroupPriorityMinimum = 20000
	maxVersionPriority      = 1000
	defaultServicePort      = int32(443)
)

// Resources returns the apiregistration.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{{
		GroupVersion: apiregistrationv1.SchemeGroupVersion,
		Resource:     "apiservices",
		Kind:         "APIService",
		SingularName: "apiservice",
		Categories:   []string{"api-extensions"},
		ValidateName: func(name string, prefix bool) []string {
			if prefix {
				return path.IsValidPathSegmentPrefix(name)
			}
			return path.IsValidPathSegmentName(name)
		},
		New:       func() runtime.Object { return &apiregistrationv1.APIService{} },
		NewList:   func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
		Strategy:  apiServiceStrategy{},
		HasStatus: true,
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
				{Name: "Available", Type: "string", Description: "Whether this service is available."},
				registry.AgeColumn,
			},
			Row: printAPIService,
		},
	}}
}

func printAPIService(obj runtime.Object) []interface{} {
	svc := obj.(*apiregistrationv1.APIService)
	service := "Local"
	if s := svc.Spec.Service; s != nil {
		service = s.Namespace + "/" + s.Name
	}
	available := string(apiregistrationv1.ConditionUnknown)
	for _, c := range svc.Status.Conditions {
		if c.Type != apiregistrationv1.Available {
			continue
		}
		available = string(c.Status)
		if c.Status != apiregistrationv1.ConditionTrue && c.Reason != "" {
			available = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
		break
	}
	return []interface{}{svc.Name, service, available, registry.Age(svc.CreationTimestamp)}
}

type apiServiceStrategy struct{ registry.BaseStrategy }

// PrepareForCreate starts an APIService with no status: availability is observed.
func (apiServiceStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*apiregistrationv1.APIService).Status = apiregistrationv1.APIServiceStatus{}
}

func (apiServiceStrategy) Default(obj runtime.Object) {
	if s := obj.(*apiregistrationv1.APIService).Spec.Service; s != nil && s.Port == nil {
		port := defaultServicePort
		s.Port = &port
	}
}

func (apiServiceStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateAPIService(obj.(*apiregistrationv1.APIService))
}

// ValidateUpdate also checks the status, which the server routes through updates of
// the status subresource.
func (apiServiceStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	svc := obj.(*apiregistrationv1.APIService)
	allErrs := validateAPIService(svc)
	statuses := []string{string(apiregistrationv1.ConditionTrue), string(apiregistrationv1.ConditionFalse), string(apiregistrationv1.ConditionUnknown)}
	for i, c := range svc.Status.Conditions {
		if !slices.Contains(statuses, string(c.Status)) {
			allErrs = append(allErrs, field.NotSupported(field.NewPath("status", "conditions").Index(i).Child("status"), c.Status, statuses))
		}
	}
	return allErrs
}

func validateAPIService(svc *apiregistrationv1.APIService) field.ErrorList {
	var allErrs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	// The name must say which group version the object registers.
	if required := spec.Version + "." + spec.Group; svc.Name != required && len(path.IsValidPathSegmentName(svc.Name)) == 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), svc.Name,
			fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)))
	}
	if spec.Group == "" && spec.Version != "v1" {
		allErrs = append(allErrs, field.Required(specPath.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if spec.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.Group) {
			allErrs = append(allErrs, field.Invalid(specPath.Child("group"), spec.Group, msg))
		}
	}
	for _, msg := range validation.IsDNS1035Label(spec.Version) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("version"), spec.Version, msg))
	}
	if spec.GroupPriorityMinimum <= 0 || spec.GroupPriorityMinimum > maxGroupPriorityMinimum {
		allErrs = append(allErrs, field.Invalid(specPath.Child("groupPriorityMinimum"), spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if spec.VersionPriority <= 0 || spec.VersionPriority > maxVersionPriority {
		allErrs = append(allErrs, field.Invalid(specPath.Child("versionPriority"), spec.VersionPriority, "must be positive and less than 1000"))
	}
	if spec.Service == nil {
		if len(spec.CABundle) != 0 {
			allErrs = append(allErrs, field.Invalid(specPath.Child("caBundle"), fmt.Sprintf("%d bytes", len(spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if spec.InsecureSkipTLSVerify {
			allErrs = append(allErrs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return allErrs
	}
	servicePath := specPath.Child("service")
	if spec.Service.Namespace == "" {
		allErrs = append(allErrs, field.Required(servicePath.Child("namespace"), ""))
	}
	if spec.Service.Name == "" {
		allErrs = append(allErrs, field.Required(servicePath.Child("name"), ""))
	}
	port := defaultServicePort
	if spec.Service.Port != nil {
		port = *spec.Service.Port
	}
	if errs := validation.IsValidPortNum(int(port)); errs != nil {
		allErrs = append(allErrs, field.Invalid(servicePath.Child("port"), port, "port is not valid: "+strings.Join(errs, ", ")))
	}
	if spec.InsecureSkipTLSVerify && len(spec.CABundle) > 0 {
		allErrs = append(allErrs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return allErrs
}

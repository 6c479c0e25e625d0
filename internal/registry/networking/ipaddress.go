package networking

import (
	"context"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// ipAddresses is networking.k8s.io/v1 ipaddresses: one IP, named by itself in canonical
// form, and the object that holds it. Upstream's service IP allocator records every
// ClusterIP as one; mizzen's allocator does not (yet), so the resource holds what
// clients store in it.
func ipAddresses() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "ipaddresses",
		Kind:         "IPAddress",
		SingularName: "ipaddress",
		ShortNames:   []string{"ip"},
		ValidateName: validateIPAddressName,
		New:          func() runtime.Object { return &networkingv1.IPAddress{} },
		NewList:      func() runtime.Object { return &networkingv1.IPAddressList{} },
		Strategy:     ipAddressStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]},
			},
			Row: func(obj runtime.Object) []interface{} {
				ip := obj.(*networkingv1.IPAddress)
				return []interface{}{ip.Name, parentRefCell(ip.Spec.ParentRef)}
			},
		},
	}
}

// validateIPAddressName: the name is an IP address in canonical form, as upstream's.
func validateIPAddressName(name string, _ bool) []string {
	var msgs []string
	for _, err := range validation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, err.Detail)
	}
	return msgs
}

// parentRefCell prints a parent reference as upstream's table does:
// resource.group/namespace/name.
func parentRefCell(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	cell := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		cell += "/" + ref.Namespace
	}
	return cell + "/" + ref.Name
}

type ipAddressStrategy struct{ registry.BaseStrategy }

func (ipAddressStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ref := obj.(*networkingv1.IPAddress).Spec.ParentRef
	fldPath := field.NewPath("spec", "parentRef")
	if ref == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	// The core group, which Services are in, is the empty one: group may be empty.
	if ref.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Group) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("group"), ref.Group, msg))
		}
	}
	pathSegment := func(name, value string, required bool) {
		if value == "" {
			if required {
				allErrs = append(allErrs, field.Required(fldPath.Child(name), ""))
			}
			return
		}
		for _, msg := range isPathSegmentName(value) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(name), value, msg))
		}
	}
	pathSegment("resource", ref.Resource, true)
	pathSegment("name", ref.Name, true)
	pathSegment("namespace", ref.Namespace, false)
	return allErrs
}

// ValidateUpdate: the parent reference is fixed once created.
func (s ipAddressStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	allErrs := s.Validate(ctx, obj)
	ref, oldRef := obj.(*networkingv1.IPAddress).Spec.ParentRef, old.(*networkingv1.IPAddress).Spec.ParentRef
	if !apiequality.Semantic.DeepEqual(ref, oldRef) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "parentRef"), ref, "field is immutable"))
	}
	return allErrs
}

// isPathSegmentName reports why name cannot be one segment of a URL path, in upstream's
// words.
func isPathSegmentName(name string) []string {
	var msgs []string
	if name == "." || name == ".." {
		msgs = append(msgs, `may not be '`+name+`'`)
	}
	for _, illegal := range []string{"/", "%"} {
		if strings.Contains(name, illegal) {
			msgs = append(msgs, `may not contain '`+illegal+`'`)
		}
	}
	return msgs
}

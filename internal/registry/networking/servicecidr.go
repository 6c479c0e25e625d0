package networking

import (
	"context"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"mizzen/internal/registry"
)

// DefaultServiceCIDRName names the ServiceCIDR the apiserver creates from its
// --service-cluster-ip-range, as upstream's.
const DefaultServiceCIDRName = "kubernetes"

// serviceCIDRs is networking.k8s.io/v1 servicecidrs: the ranges ClusterIPs come from.
// mizzen's allocator takes them from the apiserver's --service-cluster-ip-range only,
// which the default ServiceCIDR ("kubernetes") shows; it does not allocate from others.
func serviceCIDRs() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "servicecidrs",
		Kind:         "ServiceCIDR",
		SingularName: "servicecidr",
		HasStatus:    true,
		New:          func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		NewList:      func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Strategy:     serviceCIDRStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				c := obj.(*networkingv1.ServiceCIDR)
				return []interface{}{c.Name, strings.Join(c.Spec.CIDRs, ","), registry.Age(c.CreationTimestamp)}
			},
		},
	}
}

type serviceCIDRStrategy struct{ registry.BaseStrategy }

func (serviceCIDRStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateServiceCIDRs(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, field.NewPath("spec", "cidrs"))
}

// validateServiceCIDRs: one or two CIDRs in canonical form, one of each IP family.
func validateServiceCIDRs(cidrs []string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Required(fldPath, "at least one CIDR required")}
	case len(cidrs) > 2:
		return field.ErrorList{field.Invalid(fldPath, cidrs, "may only hold up to 2 values")}
	}
	var allErrs field.ErrorList
	for i, cidr := range cidrs {
		allErrs = append(allErrs, validation.IsValidCIDR(fldPath.Index(i), cidr)...)
	}
	if len(cidrs) == 2 {
		first, second := netutils.IPFamilyOfCIDRString(cidrs[0]), netutils.IPFamilyOfCIDRString(cidrs[1])
		if first == second && first != netutils.IPFamilyUnknown {
			allErrs = append(allErrs, field.Invalid(fldPath, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return allErrs
}

// ValidateUpdate: the CIDRs are fixed once created, but for adding a second one of the
// other family (to become dual-stack).
func (serviceCIDRStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	cidrs, oldCIDRs := obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, old.(*networkingv1.ServiceCIDR).Spec.CIDRs
	fldPath := field.NewPath("spec", "cidrs")
	const immutable = "field is immutable"
	var allErrs field.ErrorList
	switch {
	case len(cidrs) == len(oldCIDRs):
		for i := range oldCIDRs {
			if cidrs[i] != oldCIDRs[i] {
				allErrs = append(allErrs, field.Invalid(fldPath.Index(i), cidrs[i], immutable))
			}
		}
	case len(oldCIDRs) == 1 && len(cidrs) == 2:
		if cidrs[0] != oldCIDRs[0] {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(0), cidrs[0], immutable))
		}
		allErrs = append(allErrs, validateServiceCIDRs(cidrs, fldPath)...)
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, cidrs, immutable))
	}
	return allErrs
}

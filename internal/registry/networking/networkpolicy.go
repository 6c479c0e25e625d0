package networking

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"mizzen/internal/registry"
)

func networkPolicies() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "networkpolicies",
		Kind:         "NetworkPolicy",
		SingularName: "networkpolicy",
		Namespaced:   true,
		ShortNames:   []string{"netpol"},
		New:          func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList:      func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Strategy:     networkPolicyStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Pod-Selector", Type: "string", Description: extensionsv1beta1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				np := obj.(*networkingv1.NetworkPolicy)
				return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), registry.Age(np.CreationTimestamp)}
			},
		},
	}
}

type networkPolicyStrategy struct{ registry.BaseStrategy }

func (networkPolicyStrategy) Default(obj runtime.Object) {
	np := obj.(*networkingv1.NetworkPolicy)
	defaultPorts := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
	// A policy that names no types is an ingress policy, and an egress one too when
	// it has egress rules.
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

func (networkPolicyStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateNetworkPolicySpec(&obj.(*networkingv1.NetworkPolicy).Spec, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec"))
}

// ValidateUpdate keeps accepting selector label values that the stored policy
// already had before they were checked, as upstream does.
func (networkPolicyStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	var opts metav1validation.LabelSelectorValidationOptions
	if len(metav1validation.ValidateLabelSelector(&old.(*networkingv1.NetworkPolicy).Spec.PodSelector, opts, nil)) > 0 {
		opts.AllowInvalidLabelValueInSelector = true
	}
	return validateNetworkPolicySpec(&obj.(*networkingv1.NetworkPolicy).Spec, opts, field.NewPath("spec"))
}

var (
	supportedPolicyTypes   = []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
	supportedPortProtocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}
)

func validateNetworkPolicySpec(spec *networkingv1.NetworkPolicySpec, opts metav1validation.LabelSelectorValidationOptions, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabelSelector(&spec.PodSelector, opts, fldPath.Child("podSelector"))
	for i, rule := range spec.Ingress {
		rulePath := fldPath.Child("ingress").Index(i)
		for j := range rule.Ports {
			allErrs = append(allErrs, validateNetworkPolicyPort(&rule.Ports[j], rulePath.Child("ports").Index(j))...)
		}
		for j := range rule.From {
			allErrs = append(allErrs, validateNetworkPolicyPeer(&rule.From[j], opts, rulePath.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		rulePath := fldPath.Child("egress").Index(i)
		for j := range rule.Ports {
			allErrs = append(allErrs, validateNetworkPolicyPort(&rule.Ports[j], rulePath.Child("ports").Index(j))...)
		}
		for j := range rule.To {
			allErrs = append(allErrs, validateNetworkPolicyPeer(&rule.To[j], opts, rulePath.Child("to").Index(j))...)
		}
	}
	if len(spec.PolicyTypes) > len(supportedPolicyTypes) {
		return append(allErrs, field.Invalid(fldPath.Child("policyTypes"), &spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("policyTypes").Index(i), t, supportedPolicyTypes))
		}
	}
	return allErrs
}

func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP && *port.Protocol != corev1.ProtocolUDP && *port.Protocol != corev1.ProtocolSCTP {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("protocol"), *port.Protocol, supportedPortProtocols))
	}
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("endPort"), port.Port.IntVal, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("endPort"), *port.EndPort, msg))
			}
		}
	default:
		if port.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), port.Port.StrVal, msg))
		}
	}
	return allErrs
}

func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, opts metav1validation.LabelSelectorValidationOptions, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	peers := 0
	if peer.PodSelector != nil {
		peers++
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, fldPath.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		peers++
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, fldPath.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		peers++
		allErrs = append(allErrs, validateIPBlock(peer.IPBlock, fldPath.Child("ipBlock"))...)
	}
	switch {
	case peers == 0:
		allErrs = append(allErrs, field.Required(fldPath, "must specify a peer"))
	case peers > 1 && peer.IPBlock != nil:
		allErrs = append(allErrs, field.Forbidden(fldPath, "may not specify both ipBlock and another peer"))
	}
	return allErrs
}

func validateIPBlock(block *networkingv1.IPBlock, fldPath *field.Path) field.ErrorList {
	if block.CIDR == "" {
		return field.ErrorList{field.Required(fldPath.Child("cidr"), "")}
	}
	allErrs := validation.IsValidCIDRForLegacyField(fldPath.Child("cidr"), block.CIDR, false, nil)
	_, cidr, err := netutils.ParseCIDRSloppy(block.CIDR)
	if err != nil {
		return allErrs
	}
	cidrLen, _ := cidr.Mask.Size()
	for i, except := range block.Except {
		exceptPath := fldPath.Child("except").Index(i)
		errs := validation.IsValidCIDRForLegacyField(exceptPath, except, false, nil)
		allErrs = append(allErrs, errs...)
		_, exceptNet, err := netutils.ParseCIDRSloppy(except)
		if len(errs) > 0 || err != nil {
			continue
		}
		exceptLen, _ := exceptNet.Mask.Size()
		if !cidr.Contains(exceptNet.IP) || cidrLen >= exceptLen {
			allErrs = append(allErrs, field.Invalid(exceptPath, except, "must be a strict subset of `cidr`"))
		}
	}
	return allErrs
}

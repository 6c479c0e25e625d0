package networking

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestNetworkPolicyDefault(t *testing.T) {
	r := findResource(t, "networkpolicies")
	tests := []struct {
		name      string
		spec      networkingv1.NetworkPolicySpec
		wantTypes []networkingv1.PolicyType
	}{
		{"no rules is ingress", networkingv1.NetworkPolicySpec{}, []networkingv1.PolicyType{"Ingress"}},
		{"egress rules add Egress", networkingv1.NetworkPolicySpec{
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}},
		}, []networkingv1.PolicyType{"Ingress", "Egress"}},
		{"explicit types kept", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Egress"}},
			[]networkingv1.PolicyType{"Egress"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{Spec: tt.spec}
			r.Strategy.Default(np)
			if !reflect.DeepEqual(np.Spec.PolicyTypes, tt.wantTypes) {
				t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, tt.wantTypes)
			}
			for _, rule := range np.Spec.Egress {
				for _, p := range rule.Ports {
					if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
						t.Errorf("port protocol = %v, want TCP", p.Protocol)
					}
				}
			}
		})
	}
}

func TestNetworkPolicyValidate(t *testing.T) {
	r := findResource(t, "networkpolicies")
	port := func(p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, EndPort: end}
	}
	ingress := func(ports []networkingv1.NetworkPolicyPort, from ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports, From: from}}}
	}
	tests := []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want []fieldErr
	}{
		{"valid", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), ptr.To[int32](90))},
			networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}), nil},
		{"bad selector", networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "-bad-"}}},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.podSelector.matchLabels"}}},
		{"endPort below port", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), ptr.To[int32](79))}),
			[]fieldErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[0].endPort"}}},
		{"endPort with named port", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromString("http"), ptr.To[int32](90))}),
			[]fieldErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[0].endPort"}}},
		{"bad protocol", ingress([]networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.Protocol("ICMP"))}}),
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.ingress[0].ports[0].protocol"}}},
		{"empty peer", ingress(nil, networkingv1.NetworkPolicyPeer{}),
			[]fieldErr{{field.ErrorTypeRequired, "spec.ingress[0].from[0]"}}},
		{"ipBlock and selector", ingress(nil, networkingv1.NetworkPolicyPeer{
			PodSelector: &metav1.LabelSelector{}, IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}),
			[]fieldErr{{field.ErrorTypeForbidden, "spec.ingress[0].from[0]"}}},
		{"except outside cidr", ingress(nil, networkingv1.NetworkPolicyPeer{
			IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"192.168.0.0/16"}}}),
			[]fieldErr{{field.ErrorTypeInvalid, "spec.ingress[0].from[0].ipBlock.except[0]"}}},
		{"bad cidr", ingress(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0"}}),
			[]fieldErr{{field.ErrorTypeInvalid, "spec.ingress[0].from[0].ipBlock.cidr"}}},
		{"unknown policy type", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Sideways"}},
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.policyTypes[0]"}}},
		{"three policy types", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress", "Egress", "Ingress"}},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.policyTypes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: tt.spec}
			r.Strategy.Default(np)
			assertErrs(t, r.Strategy.Validate(ctx, np), tt.want)
		})
	}
}

func TestNetworkPolicyPrint(t *testing.T) {
	r := findResource(t, "networkpolicies")
	assertColumns(t, r, "Name", "Pod-Selector", "Age")
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", CreationTimestamp: threeDaysAgo}}
	if got, want := r.Printer.Row(np), []interface{}{"deny", "<none>", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	if got, want := r.Printer.Row(np), []interface{}{"deny", "app=web", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

func TestNetworkPolicyUpdateKeepsStoredSelectorValues(t *testing.T) {
	r := findResource(t, "networkpolicies")
	old := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"-bad-"}}}}}}
	r.Strategy.Default(old)
	updated := old.DeepCopy()
	updated.Labels = map[string]string{"touched": "yes"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)
	fixedOld := old.DeepCopy()
	fixedOld.Spec.PodSelector.MatchExpressions[0].Values = []string{"ok"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, old.DeepCopy(), fixedOld), []fieldErr{{field.ErrorTypeInvalid, "spec.podSelector.matchExpressions[0].values[0]"}})
}

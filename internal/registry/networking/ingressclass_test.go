package networking

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestIngressClassDefaultAndValidate(t *testing.T) {
	r := findResource(t, "ingressclasses")
	if r.Namespaced || r.Kind != "IngressClass" {
		t.Errorf("identity = %+v", r)
	}
	tests := []struct {
		name  string
		spec  networkingv1.IngressClassSpec
		want  []fieldErr
		scope *string // expected scope after defaulting
	}{
		{"valid", networkingv1.IngressClassSpec{Controller: "example.com/ingress"}, nil, nil},
		{"parameters scope defaults to Cluster", networkingv1.IngressClassSpec{
			Controller: "example.com/ingress",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c"},
		}, nil, ptr.To("Cluster")},
		{"missing controller", networkingv1.IngressClassSpec{}, []fieldErr{{field.ErrorTypeRequired, "spec.controller"}}, nil},
		{"controller not domain-prefixed", networkingv1.IngressClassSpec{Controller: "nginx"},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.controller"}}, nil},
		{"namespace scope without namespace", networkingv1.IngressClassSpec{
			Controller: "example.com/ingress",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c", Scope: ptr.To("Namespace")},
		}, []fieldErr{{field.ErrorTypeRequired, "spec.parameters.namespace"}}, ptr.To("Namespace")},
		{"cluster scope with namespace", networkingv1.IngressClassSpec{
			Controller: "example.com/ingress",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c", Namespace: ptr.To("ns")},
		}, []fieldErr{{field.ErrorTypeForbidden, "spec.parameters.namespace"}}, ptr.To("Cluster")},
		{"unknown scope", networkingv1.IngressClassSpec{
			Controller: "example.com/ingress",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c", Scope: ptr.To("Galaxy")},
		}, []fieldErr{{field.ErrorTypeNotSupported, "spec.parameters.scope"}}, ptr.To("Galaxy")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: tt.spec}
			r.Strategy.Default(ic)
			if ic.Spec.Parameters != nil && !reflect.DeepEqual(ic.Spec.Parameters.Scope, tt.scope) {
				t.Errorf("scope = %v, want %v", ptr.Deref(ic.Spec.Parameters.Scope, "<nil>"), ptr.Deref(tt.scope, "<nil>"))
			}
			assertErrs(t, r.Strategy.Validate(ctx, ic), tt.want)
		})
	}
}

func TestIngressClassControllerImmutable(t *testing.T) {
	r := findResource(t, "ingressclasses")
	old := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/a"}}
	updated := old.DeepCopy()
	updated.Spec.Controller = "example.com/b"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), []fieldErr{{field.ErrorTypeInvalid, "spec.controller"}})
}

func TestIngressClassPrint(t *testing.T) {
	r := findResource(t, "ingressclasses")
	assertColumns(t, r, "Name", "Controller", "Parameters", "Age")
	ic := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", CreationTimestamp: threeDaysAgo},
		Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"}},
	}
	want := []interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb", "3d"}
	if got := r.Printer.Row(ic); !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	ic.Spec.Parameters = nil
	want = []interface{}{"nginx", "k8s.io/ingress-nginx", "<none>", "3d"}
	if got := r.Printer.Row(ic); !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

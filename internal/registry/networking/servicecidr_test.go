package networking

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestServiceCIDRValidate(t *testing.T) {
	r := findResource(t, "servicecidrs")
	if !r.HasStatus || r.Namespaced {
		t.Errorf("identity = %+v", r)
	}
	tests := []struct {
		name  string
		cidrs []string
		want  []fieldErr
	}{
		{"ipv4", []string{"10.96.0.0/12"}, nil},
		{"dual-stack", []string{"10.96.0.0/12", "fd00:10:96::/112"}, nil},
		{"none", nil, []fieldErr{{field.ErrorTypeRequired, "spec.cidrs"}}},
		{"three", []string{"10.0.0.0/24", "10.1.0.0/24", "10.2.0.0/24"}, []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs"}}},
		{"two of a family", []string{"10.0.0.0/24", "10.1.0.0/24"}, []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs"}}},
		{"not canonical", []string{"10.96.0.1/12"}, []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs[0]"}}},
		{"not a CIDR", []string{"10.96.0.1"}, []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs[0]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: tt.cidrs}}
			assertErrs(t, r.Strategy.Validate(ctx, c), tt.want)
		})
	}
}

func TestServiceCIDRUpdate(t *testing.T) {
	r := findResource(t, "servicecidrs")
	old := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}}
	with := func(cidrs ...string) *networkingv1.ServiceCIDR {
		c := old.DeepCopy()
		c.Spec.CIDRs = cidrs
		return c
	}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, with("10.96.0.0/12", "fd00::/112"), old), nil)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, with("10.100.0.0/16"), old), []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs[0]"}})
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, with("10.100.0.0/16", "fd00::/112"), old), []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs[0]"}})
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, with(), old), []fieldErr{{field.ErrorTypeInvalid, "spec.cidrs"}})
}

func TestServiceCIDRPrint(t *testing.T) {
	r := findResource(t, "servicecidrs")
	assertColumns(t, r, "Name", "CIDRs", "Age")
	c := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", CreationTimestamp: threeDaysAgo},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00::/112"}}}
	if got, want := r.Printer.Row(c), []interface{}{"kubernetes", "10.96.0.0/12,fd00::/112", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}

package networking

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestIPAddressName(t *testing.T) {
	r := findResource(t, "ipaddresses")
	for name, valid := range map[string]bool{
		"10.0.0.1": true, "255.255.255.255": true, "fe80::42:1dff:fe84:f9e2": true, "2001:db8::1": true,
		"2001:DB8::1": false, "010.0.0.1": false, "::ffff:10.0.0.1": false, "web": false, "10.0.0.0/24": false,
	} {
		if got := len(r.ValidateName(name, false)) == 0; got != valid {
			t.Errorf("name %q valid = %v, want %v (%v)", name, got, valid, r.ValidateName(name, false))
		}
	}
}

func TestIPAddressValidate(t *testing.T) {
	r := findResource(t, "ipaddresses")
	meta := metav1.ObjectMeta{Name: "10.0.0.1"}
	ref := func(group, resource, namespace, name string) networkingv1.IPAddressSpec {
		return networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: group, Resource: resource, Namespace: namespace, Name: name}}
	}
	tests := []struct {
		name string
		spec networkingv1.IPAddressSpec
		want []fieldErr
	}{
		{"a service's", ref("", "services", "default", "web"), nil},
		{"cluster-scoped parent", ref("mygroup", "myresources", "", "bar"), nil},
		{"no parent", networkingv1.IPAddressSpec{}, []fieldErr{{field.ErrorTypeRequired, "spec.parentRef"}}},
		{"no resource or name", ref("", "", "", ""), []fieldErr{{field.ErrorTypeRequired, "spec.parentRef.resource"}, {field.ErrorTypeRequired, "spec.parentRef.name"}}},
		{"bad group", ref("My_Group", "things", "", "a"), []fieldErr{{field.ErrorTypeInvalid, "spec.parentRef.group"}}},
		{"slash in name", ref("", "services", "default", "a/b"), []fieldErr{{field.ErrorTypeInvalid, "spec.parentRef.name"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErrs(t, r.Strategy.Validate(ctx, &networkingv1.IPAddress{ObjectMeta: meta, Spec: tt.spec}), tt.want)
		})
	}
	old := &networkingv1.IPAddress{ObjectMeta: meta, Spec: ref("", "services", "default", "web")}
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{"updated": "true"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, annotated, old), nil)
	moved := old.DeepCopy()
	moved.Spec.ParentRef.Name = "other"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, moved, old), []fieldErr{{field.ErrorTypeInvalid, "spec.parentRef"}})
}

func TestIPAddressPrint(t *testing.T) {
	r := findResource(t, "ipaddresses")
	assertColumns(t, r, "Name", "ParentRef")
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.1"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}}}
	if got, want := r.Printer.Row(ip), []interface{}{"10.0.0.1", "services/default/web"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	ip.Spec.ParentRef = &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Name: "bar"}
	if got := r.Printer.Row(ip)[1]; got != "myresources.mygroup/bar" {
		t.Errorf("parentRef cell = %q", got)
	}
}

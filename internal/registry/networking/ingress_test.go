package networking

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validIngress() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: "example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
					}},
				}},
			}},
		},
	}
}

func TestIngressValidate(t *testing.T) {
	r := findResource(t, "ingresses")
	if r.Kind != "Ingress" || !r.Namespaced || !r.HasStatus || !reflect.DeepEqual(r.ShortNames, []string{"ing"}) {
		t.Errorf("identity = %+v", r)
	}
	backend := func(i *networkingv1.Ingress) *networkingv1.IngressBackend {
		return &i.Spec.Rules[0].HTTP.Paths[0].Backend
	}
	tests := []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   []fieldErr
	}{
		{"valid", func(*networkingv1.Ingress) {}, nil},
		{"wildcard host", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "*.example.com" }, nil},
		{"no rules and no default backend", func(i *networkingv1.Ingress) { i.Spec.Rules = nil },
			[]fieldErr{{field.ErrorTypeInvalid, "spec"}}},
		{"IP host", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "10.0.0.1" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].host"}}},
		{"bad host", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "Bad_Host" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].host"}}},
		{"missing pathType", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].PathType = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].pathType"}}},
		{"unknown pathType", func(i *networkingv1.Ingress) {
			i.Spec.Rules[0].HTTP.Paths[0].PathType = ptr.To(networkingv1.PathType("Regex"))
		}, []fieldErr{{field.ErrorTypeNotSupported, "spec.rules[0].http.paths[0].pathType"}}},
		{"relative path", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Path = "api" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].path"}}},
		{"path with //", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Path = "/a//b" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].path"}}},
		{"no paths", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths"}}},
		{"service without name", func(i *networkingv1.Ingress) { backend(i).Service.Name = "" },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend.service.name"}}},
		{"service without port", func(i *networkingv1.Ingress) { backend(i).Service.Port = networkingv1.ServiceBackendPort{} },
			[]fieldErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend"}}},
		{"port name and number", func(i *networkingv1.Ingress) { backend(i).Service.Port.Name = "http" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].backend"}}},
		{"port out of range", func(i *networkingv1.Ingress) { backend(i).Service.Port.Number = 70000 },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].backend.service.port.number"}}},
		{"no backend", func(i *networkingv1.Ingress) { *backend(i) = networkingv1.IngressBackend{} },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].backend"}}},
		{"resource backend without kind", func(i *networkingv1.Ingress) {
			b := backend(i)
			b.Service = nil
			b.Resource = &corev1.TypedLocalObjectReference{Name: "bucket"}
		}, []fieldErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend.resource.kind"}}},
		{"bad TLS host", func(i *networkingv1.Ingress) {
			i.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a..b"}, SecretName: "tls"}}
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.tls[0].hosts[0]"}}},
		{"bad class name", func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr.To("Nginx") },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.ingressClassName"}}},
		{"annotation disagrees with class", func(i *networkingv1.Ingress) {
			i.Spec.IngressClassName = ptr.To("nginx")
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
		}, []fieldErr{{field.ErrorTypeInvalid, "annotations.kubernetes.io/ingress.class"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := validIngress()
			tt.mutate(ing)
			r.Strategy.Default(ing)
			assertErrs(t, r.Strategy.Validate(ctx, ing), tt.want)
		})
	}
}

func TestIngressPrint(t *testing.T) {
	r := findResource(t, "ingresses")
	assertColumns(t, r, "Name", "Class", "Hosts", "Address", "Ports", "Age")
	rule := func(host string) networkingv1.IngressRule { return networkingv1.IngressRule{Host: host} }
	tests := []struct {
		name string
		ing  networkingv1.Ingress
		want []interface{}
	}{
		{"minimal", networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: threeDaysAgo},
			Spec:       networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{}},
		}, []interface{}{"a", "<none>", "*", "", "80", "3d"}},
		{"hosts, tls, addresses", networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: threeDaysAgo},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To("nginx"),
				Rules:            []networkingv1.IngressRule{rule("a.com"), rule(""), rule("b.com"), rule("c.com"), rule("d.com")},
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.com"}}},
			},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
				Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.2"}, {Hostname: "lb.example.com"}, {IP: "10.0.0.2"}},
			}},
		}, []interface{}{"b", "nginx", "a.com,b.com,c.com + 2 more...", "10.0.0.2,lb.example.com", "80, 443", "3d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Printer.Row(&tt.ing); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestIngressStatusValidation(t *testing.T) {
	r := findResource(t, "ingresses")
	old := validIngress()
	tests := []struct {
		name string
		lb   []networkingv1.IngressLoadBalancerIngress
		want []fieldErr
	}{
		{"valid", []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}, nil},
		{"bad IP", []networkingv1.IngressLoadBalancerIngress{{IP: "300.1.1.1"}}, []fieldErr{{field.ErrorTypeInvalid, "status.loadBalancer.ingress[0].ip"}}},
		{"IP as hostname", []networkingv1.IngressLoadBalancerIngress{{Hostname: "192.0.2.1"}}, []fieldErr{{field.ErrorTypeInvalid, "status.loadBalancer.ingress[0].hostname"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := old.DeepCopy()
			ing.Status.LoadBalancer.Ingress = tt.lb
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, ing, old), tt.want)
		})
	}
}

func TestIngressStatusClearedOnCreate(t *testing.T) {
	r := findResource(t, "ingresses")
	ing := validIngress()
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
	r.Strategy.PrepareForCreate(ctx, ing)
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("status kept on create: %+v", ing.Status)
	}
}

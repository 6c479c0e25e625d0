package netpol

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(ns, name, node, ip string, labels map[string]string, ports ...v1.ContainerPort) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Ports: ports}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip}}
}

func namespace(name string, labels map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// show prints rules as "peers proto:lo-hi", sorted as compiled.
func show(rules []Rule) string {
	var out []string
	for _, r := range rules {
		peers := "any"
		if !r.Any {
			var ps []string
			for _, p := range r.Peers {
				if p.Lo == p.Hi {
					ps = append(ps, p.Lo.String())
				} else {
					ps = append(ps, p.Lo.String()+"-"+p.Hi.String())
				}
			}
			peers = strings.Join(ps, ",")
		}
		port := ""
		if r.Proto != 0 {
			port = fmt.Sprintf(" %d", r.Proto)
			if r.PortLo != 0 {
				port += fmt.Sprintf(":%d-%d", r.PortLo, r.PortHi)
			}
		}
		out = append(out, peers+port)
	}
	return strings.Join(out, " | ")
}

func TestCompile(t *testing.T) {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	end := int32(90)
	pods := []*v1.Pod{
		pod("prod", "web", "n1", "10.1.1.2", map[string]string{"app": "web"}, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		pod("prod", "db", "n2", "10.1.2.2", map[string]string{"app": "db"}, v1.ContainerPort{Name: "http", ContainerPort: 5432}),
		pod("prod", "client", "n2", "10.1.2.3", map[string]string{"app": "client"}),
		pod("dev", "client", "n1", "10.1.1.3", map[string]string{"app": "client"}),
		pod("prod", "other", "n1", "10.1.1.4", map[string]string{"app": "other"}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "host", Labels: map[string]string{"app": "web"}},
			Spec: v1.PodSpec{NodeName: "n1", HostNetwork: true}, Status: v1.PodStatus{PodIP: "192.168.0.1"}},
	}
	nss := []*v1.Namespace{namespace("prod", map[string]string{"env": "prod"}), namespace("dev", map[string]string{"env": "dev"})}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	pol := func(name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}, Spec: spec}
	}
	for _, tc := range []struct {
		name            string
		policies        []*networkingv1.NetworkPolicy
		ingress, egress map[string]string // pod address of node n1 -> its rules
	}{
		{name: "no policy isolates nothing", ingress: map[string]string{}, egress: map[string]string{}},
		{name: "default deny ingress",
			policies: []*networkingv1.NetworkPolicy{pol("deny", networkingv1.NetworkPolicySpec{})},
			ingress:  map[string]string{"10.1.1.2": "", "10.1.1.4": ""}, egress: map[string]string{}},
		{name: "podSelector in the policy's namespace, with a port and a range",
			policies: []*networkingv1.NetworkPolicy{pol("web", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "client")}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(80)), EndPort: &end}, {Protocol: &udp}},
				}}})},
			ingress: map[string]string{"10.1.1.2": "10.1.2.3 6:80-90 | 10.1.2.3 17"}, egress: map[string]string{}},
		{name: "namespaceSelector alone and with a podSelector; a named port of the selected pod",
			policies: []*networkingv1.NetworkPolicy{pol("web", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{NamespaceSelector: sel("env", "dev")},
						{NamespaceSelector: sel("env", "prod"), PodSelector: sel("app", "db")}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("http"))}},
				}}})},
			ingress: map[string]string{"10.1.1.2": "10.1.1.3,10.1.2.2 6:8080-8080"}, egress: map[string]string{}},
		{name: "ipBlock with except, and policyTypes Egress only",
			policies: []*networkingv1.NetworkPolicy{pol("out", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/16", Except: []string{"10.1.2.0/24"}}}}}}})},
			ingress: map[string]string{}, egress: map[string]string{"10.1.1.2": "10.1.0.0-10.1.1.255,10.1.3.0-10.1.255.255"}},
		{name: "egress to a named port resolves in each peer pod",
			policies: []*networkingv1.NetworkPolicy{pol("out", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "other"),
				Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("http"))}}}}})},
			ingress: map[string]string{"10.1.1.4": ""}, egress: map[string]string{"10.1.1.4": "10.1.1.2 6:8080-8080 | 10.1.2.2 6:5432-5432"}},
		{name: "an empty from allows everyone; two policies add up",
			policies: []*networkingv1.NetworkPolicy{
				pol("a", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"), Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}),
				pol("b", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "nothing")}}}}})},
			ingress: map[string]string{"10.1.1.2": "any"}, egress: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := Compile(Input{NodeName: "n1", Pods: pods, Namespaces: nss, Policies: tc.policies})
			for dir, want := range map[string]map[string]string{"ingress": tc.ingress, "egress": tc.egress} {
				got := rs.Ingress
				if dir == "egress" {
					got = rs.Egress
				}
				if len(got) != len(want) {
					t.Errorf("%s: isolated %v, want %v", dir, got, want)
				}
				for addr, rules := range want {
					r, ok := got[netip.MustParseAddr(addr)]
					if !ok || show(r) != rules {
						t.Errorf("%s of %s: %q (isolated %v), want %q", dir, addr, show(r), ok, rules)
					}
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

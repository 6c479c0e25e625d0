package core

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestServiceDefaults(t *testing.T) {
	cluster, local := corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyCluster
	tests := []struct {
		name string
		in   corev1.ServiceSpec
		want corev1.ServiceSpec
	}{{
		name: "cluster IP service",
		in:   corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
		want: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Type: corev1.ServiceTypeClusterIP,
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster,
			Ports:          []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
			IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicySingleStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}, {
		name: "node port with named target and client IP affinity",
		in: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}},
		want: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10800))}},
			Ports:                 []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
			ExternalTrafficPolicy: local, InternalTrafficPolicy: &cluster,
			IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicySingleStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}, {
		name: "load balancer",
		in:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
		want: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
			Ports:                 []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443)}},
			ExternalTrafficPolicy: local, InternalTrafficPolicy: &cluster, AllocateLoadBalancerNodePorts: ptrTo(true),
			IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicySingleStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}, {
		name: "headless without selector",
		in:   corev1.ServiceSpec{ClusterIP: "None"},
		want: corev1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}, Type: corev1.ServiceTypeClusterIP,
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster,
			IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicyRequireDualStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
	}, {
		name: "external name gets no IP fields",
		in:   corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
		want: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Service{Spec: *tc.in.DeepCopy()}
			servicesResource().Strategy.Default(s)
			if !equality.Semantic.DeepEqual(s.Spec, tc.want) {
				t.Errorf("spec:\n got %+v\nwant %+v", s.Spec, tc.want)
			}
		})
	}
}

func newService(mutate func(*corev1.ServiceSpec)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	mutate(&s.Spec)
	defaultService(s)
	return s
}

func TestServiceValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.ServiceSpec)
		want   []string
	}{
		{"valid", func(*corev1.ServiceSpec) {}, nil},
		{"no ports", func(s *corev1.ServiceSpec) { s.Ports = nil }, []string{"spec.ports: Required value"}},
		{"headless without ports", func(s *corev1.ServiceSpec) { s.Ports = nil; s.ClusterIP = "None" }, nil},
		{"bad type", func(s *corev1.ServiceSpec) { s.Type = "Internal" },
			[]string{`spec.type: Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}},
		{"port out of range", func(s *corev1.ServiceSpec) { s.Ports[0].Port = 70000 },
			// The defaulted targetPort inherits the bad number, as upstream reports too.
			[]string{"spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
				"spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"second port unnamed", func(s *corev1.ServiceSpec) {
			s.Ports[0].Name = "http"
			s.Ports = append(s.Ports, corev1.ServicePort{Port: 443})
		}, []string{"spec.ports[1].name: Required value"}},
		{"node port on cluster IP service", func(s *corev1.ServiceSpec) { s.Ports[0].NodePort = 30080 },
			[]string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"}},
		{"node port out of range", func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort; s.Ports[0].NodePort = 8080 },
			[]string{"spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"}},
		{"node port in range", func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort; s.Ports[0].NodePort = 30080 }, nil},
		{"bad selector", func(s *corev1.ServiceSpec) { s.Selector = map[string]string{"app": "not valid!"} },
			[]string{`spec.selector: Invalid value: "not valid!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{"external name required", func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeExternalName; s.Selector = nil },
			[]string{"spec.externalName: Required value"}},
		{"headless node port", func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort; s.ClusterIP = "None" },
			[]string{`spec.clusterIP: Invalid value: "None": may not be set to 'None' for NodePort services`}},
		{"external name with cluster IP", func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalName, s.ClusterIP = corev1.ServiceTypeExternalName, "db.example.com", "10.96.0.5"
		}, []string{"spec.clusterIP: Forbidden: must be empty for ExternalName services"}},
		{"cluster IPs disagree", func(s *corev1.ServiceSpec) { s.ClusterIP, s.ClusterIPs = "10.96.0.5", []string{"10.96.0.6"} },
			[]string{`spec.clusterIPs: Invalid value: ["10.96.0.6"]: first value must match ` + "`clusterIP`"}},
		{"source ranges on a cluster IP service", func(s *corev1.ServiceSpec) { s.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			[]string{"spec.loadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
		{"bad source range", func(s *corev1.ServiceSpec) {
			s.Type = corev1.ServiceTypeLoadBalancer
			s.LoadBalancerSourceRanges = []string{"10.0.0.0"}
		}, []string{`spec.loadBalancerSourceRanges[0]: Invalid value: "10.0.0.0": must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 `}},
		{"bad cluster IP", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.0.0.300" },
			[]string{`spec.clusterIPs[0]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, servicesResource().Strategy.Validate(context.Background(), newService(tc.mutate)), tc.want)
		})
	}
}

func TestServiceUpdateKeepsAllocations(t *testing.T) {
	old := newService(func(s *corev1.ServiceSpec) {
		s.Type = corev1.ServiceTypeNodePort
		s.ClusterIP = "10.96.0.10"
		s.Ports[0].NodePort = 31000
	})
	// A PUT of the original manifest leaves out what the server allocated.
	update := newService(func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort })
	strategy := servicesResource().Strategy
	strategy.PrepareForUpdate(context.Background(), update, old)
	if update.Spec.ClusterIP != "10.96.0.10" || update.Spec.Ports[0].NodePort != 31000 {
		t.Errorf("update lost allocations: clusterIP %q nodePort %d", update.Spec.ClusterIP, update.Spec.Ports[0].NodePort)
	}
	assertErrors(t, strategy.ValidateUpdate(context.Background(), update, old), nil)

	changed := update.DeepCopy()
	changed.Spec.ClusterIP, changed.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	assertErrors(t, strategy.ValidateUpdate(context.Background(), changed, old),
		[]string{`spec.clusterIPs[0]: Invalid value: ["10.96.0.11"]: may not change once set`})
}

func TestServicePrinter(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-3 * time.Hour))
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []interface{}
	}{{
		name:   "cluster IP",
		mutate: func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"} },
		want:   []interface{}{"web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "3h", "app=web"},
	}, {
		name: "node port",
		mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIPs = []string{"10.96.0.10"}
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}
		},
		want: []interface{}{"web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "3h", "app=web"},
	}, {
		name: "pending load balancer",
		mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ClusterIPs = []string{"10.96.0.10"}
		},
		want: []interface{}{"web", "LoadBalancer", "10.96.0.10", "<pending>", "80/TCP", "3h", "app=web"},
	}, {
		name: "load balancer with ingress and external IP",
		mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalIPs = []string{"192.0.2.9"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}, {Hostname: "lb.example.com"}}
		},
		want: []interface{}{"web", "LoadBalancer", "<none>", "203.0.113.5,lb.example.com,192.0.2.9", "80/TCP", "3h", "app=web"},
	}, {
		name: "external name without selector or ports",
		mutate: func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
		},
		want: []interface{}{"web", "ExternalName", "<none>", "db.example.com", "<none>", "3h", "<none>"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
			tc.mutate(s)
			assertRow(t, servicesResource().Printer.Row(s), tc.want)
		})
	}
}

func TestServiceTypeChangeDropsFields(t *testing.T) {
	nodePort := newService(func(s *corev1.ServiceSpec) {
		s.Type = corev1.ServiceTypeNodePort
		s.ClusterIP = "10.96.0.10"
		s.Ports[0].NodePort = 31000
	})
	strategy := servicesResource().Strategy
	ctx := context.Background()

	// kubectl edit: only the type changes to ClusterIP.
	toClusterIP := nodePort.DeepCopy()
	toClusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	strategy.Default(toClusterIP)
	strategy.PrepareForUpdate(ctx, toClusterIP, nodePort)
	if toClusterIP.Spec.Ports[0].NodePort != 0 || toClusterIP.Spec.ExternalTrafficPolicy != "" || toClusterIP.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("NodePort -> ClusterIP: %+v", toClusterIP.Spec)
	}
	assertErrors(t, strategy.ValidateUpdate(ctx, toClusterIP, nodePort), nil)

	toExternal := nodePort.DeepCopy()
	toExternal.Spec.Type, toExternal.Spec.ExternalName, toExternal.Spec.Selector = corev1.ServiceTypeExternalName, "db.example.com", nil
	strategy.Default(toExternal)
	strategy.PrepareForUpdate(ctx, toExternal, nodePort)
	if toExternal.Spec.ClusterIP != "" || toExternal.Spec.IPFamilies != nil || toExternal.Spec.InternalTrafficPolicy != nil || toExternal.Spec.Ports[0].NodePort != 0 {
		t.Errorf("NodePort -> ExternalName: %+v", toExternal.Spec)
	}
	assertErrors(t, strategy.ValidateUpdate(ctx, toExternal, nodePort), nil)
}

func TestServiceLoadBalancerIPMode(t *testing.T) {
	old := newService(func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeLoadBalancer })
	svc := old.DeepCopy()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}, {Hostname: "lb.example.com"}}
	servicesResource().Strategy.PrepareForUpdate(context.Background(), svc, old)
	in := svc.Status.LoadBalancer.Ingress
	if in[0].IPMode == nil || *in[0].IPMode != corev1.LoadBalancerIPModeVIP || in[1].IPMode != nil {
		t.Errorf("ingress = %+v, want VIP for the IP and nothing for the hostname", in)
	}
}

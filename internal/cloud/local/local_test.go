package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/cloud"
)

func svc(name string, ports ...int32) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Port: p, Protocol: v1.ProtocolTCP})
	}
	return s
}

func nodeWith(name string, addrs ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Addresses: addrs}}
}

func ips(s *v1.LoadBalancerStatus) []string {
	var out []string
	for _, in := range s.Ingress {
		out = append(out, in.IP)
	}
	return out
}

func TestParsePool(t *testing.T) {
	for _, tc := range []struct {
		in          string
		first, last string
		size        int
		err         string
	}{
		{in: "10.250.152.0/24", first: "10.250.152.1", last: "10.250.152.254", size: 254},
		{in: "10.250.152.0/30", first: "10.250.152.1", last: "10.250.152.2", size: 2},
		{in: "10.250.152.8/31", first: "10.250.152.8", last: "10.250.152.9", size: 2},
		{in: "10.250.152.7/32", first: "10.250.152.7", last: "10.250.152.7", size: 1},
		{in: "10.250.152.10-10.250.152.20", first: "10.250.152.10", last: "10.250.152.20", size: 11},
		{in: "10.250.152.20-10.250.152.10", err: "comes after"},
		{in: "fd00::/64", err: "neither an IPv4 CIDR"},
		{in: "banana", err: "neither an IPv4 CIDR"},
	} {
		p, err := parsePool(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if p.first.String() != tc.first || p.last.String() != tc.last || p.size() != tc.size {
			t.Errorf("%s: %s-%s (%d), want %s-%s (%d)", tc.in, p.first, p.last, p.size(), tc.first, tc.last, tc.size)
		}
	}
}

func TestPoolAllocation(t *testing.T) {
	ctx := context.Background()
	p, err := New(Options{LBPool: "10.250.152.0/30"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.EnsureLoadBalancer(ctx, "k", svc("a", 80), nil)
	if err != nil || !slices.Equal(ips(a), []string{"10.250.152.1"}) || a.Ingress[0].IPMode == nil || *a.Ingress[0].IPMode != v1.LoadBalancerIPModeVIP {
		t.Fatalf("a: %+v %v", a, err)
	}
	// Again: the same address.
	if again, _ := p.EnsureLoadBalancer(ctx, "k", svc("a", 80), nil); !slices.Equal(ips(again), []string{"10.250.152.1"}) {
		t.Errorf("a again: %v", ips(again))
	}
	b, _ := p.EnsureLoadBalancer(ctx, "k", svc("b", 80), nil)
	if !slices.Equal(ips(b), []string{"10.250.152.2"}) {
		t.Errorf("b: %v", ips(b))
	}
	_, err = p.EnsureLoadBalancer(ctx, "k", svc("c", 80), nil)
	if err == nil || err.Error() != "the load balancer pool 10.250.152.0/30 is exhausted: all 2 addresses are in use" {
		t.Errorf("c: %v", err)
	}
	wantIP := svc("d", 80)
	wantIP.Spec.LoadBalancerIP = "10.250.152.2"
	if _, err := p.EnsureLoadBalancer(ctx, "k", wantIP, nil); err == nil || !strings.Contains(err.Error(), "already used by service default/b") {
		t.Errorf("d asking for b's address: %v", err)
	}
	wantIP.Spec.LoadBalancerIP = "10.0.0.1"
	if _, err := p.EnsureLoadBalancer(ctx, "k", wantIP, nil); err == nil || !strings.Contains(err.Error(), "is not in the load balancer pool") {
		t.Errorf("d asking outside the pool: %v", err)
	}
	if err := p.EnsureLoadBalancerDeleted(ctx, "k", svc("a")); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := p.GetLoadBalancer(ctx, "k", svc("a")); exists {
		t.Error("a's load balancer exists after its deletion")
	}
	if c, err := p.EnsureLoadBalancer(ctx, "k", svc("c", 80), nil); err != nil || !slices.Equal(ips(c), []string{"10.250.152.1"}) {
		t.Errorf("c after a freed its address: %v %v", c, err)
	}
}

func TestInitializeKeepsAddressesAcrossRestarts(t *testing.T) {
	held := svc("held", 80)
	held.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.250.152.1"}}
	p, _ := New(Options{LBPool: "10.250.152.0/30"})
	if err := p.Initialize(context.Background(), k8sfake.NewClientset(held)); err != nil {
		t.Fatal(err)
	}
	s, err := p.EnsureLoadBalancer(context.Background(), "k", svc("new", 80), nil)
	if err != nil || !slices.Equal(ips(s), []string{"10.250.152.2"}) {
		t.Errorf("new: %v %v, want the address the restart did not give away", s, err)
	}
}

func TestNodeAddressesAsServiceLB(t *testing.T) {
	ctx := context.Background()
	p, _ := New(Options{})
	nodes := []*v1.Node{
		nodeWith("b", v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.2"}, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "203.0.113.2"}),
		nodeWith("a", v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, v1.NodeAddress{Type: v1.NodeHostName, Address: "a"}),
	}
	s, err := p.EnsureLoadBalancer(ctx, "k", svc("web", 80), nodes)
	if err != nil || !slices.Equal(ips(s), []string{"192.0.2.1", "203.0.113.2"}) {
		t.Fatalf("web: %v %v, want a's InternalIP and b's ExternalIP", s, err)
	}
	if _, err := p.EnsureLoadBalancer(ctx, "k", svc("other", 443, 80), nodes); err == nil ||
		err.Error() != "port 80/TCP of the nodes' addresses is already taken by the load balancer of service default/web" {
		t.Errorf("other on web's port: %v", err)
	}
	if _, err := p.EnsureLoadBalancer(ctx, "k", svc("other", 443), nodes); err != nil {
		t.Errorf("other on a free port: %v", err)
	}
	if err := p.UpdateLoadBalancer(ctx, "k", svc("web", 80), nodes[1:]); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := p.GetLoadBalancer(ctx, "k", svc("web")); !slices.Equal(ips(s), []string{"192.0.2.1"}) {
		t.Errorf("after the node set shrank: %v", ips(s))
	}
	if _, err := p.EnsureLoadBalancer(ctx, "k", svc("x", 8080), nil); err == nil || !strings.Contains(err.Error(), "no node has an IPv4 address") {
		t.Errorf("no nodes: %v", err)
	}
}

func TestInstancesFromFlagsAnnotationAndFile(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "cloud.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		// A new modification time, so the provider sees the change at once.
		later := time.Now().Add(time.Duration(len(s)) * time.Second)
		_ = os.Chtimes(file, later, later)
	}
	write("region: file-region\nnodes:\n  n2:\n    zone: z2\n    externalIP: 203.0.113.2\n    labels: {example.com/rack: r7}\n")
	p, err := New(Options{ConfigFile: file, Zone: "flag-zone", Region: "flag-region"})
	if err != nil {
		t.Fatal(err)
	}
	n1 := nodeWith("n1")
	n1.Annotations = map[string]string{cloud.AnnotationProvidedNodeIP: "192.0.2.1"}
	m, err := p.InstanceMetadata(ctx, n1)
	if err != nil {
		t.Fatal(err)
	}
	if m.ProviderID != "local://n1" || m.Zone != "flag-zone" || m.Region != "file-region" || m.InstanceType != DefaultInstanceType ||
		!slices.Equal(m.NodeAddresses, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}}) {
		t.Errorf("n1: %+v", m)
	}
	n2 := nodeWith("n2", v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.2"})
	m, _ = p.InstanceMetadata(ctx, n2)
	if m.Zone != "z2" || m.AdditionalLabels["example.com/rack"] != "r7" ||
		!slices.Equal(m.NodeAddresses, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.2"}, {Type: v1.NodeExternalIP, Address: "203.0.113.2"}}) {
		t.Errorf("n2: %+v", m)
	}
	if _, err := p.InstanceMetadata(ctx, nodeWith("n3")); err == nil || !strings.Contains(err.Error(), "has no address") {
		t.Errorf("n3 without any address: %v", err)
	}
	if exists, _ := p.InstanceExists(ctx, n2); !exists {
		t.Error("n2 should exist")
	}
	// Marking machines in the file takes effect without a restart.
	write("nodes:\n  n2:\n    removed: true\n  n1:\n    shutdown: true\n")
	if exists, err := p.InstanceExists(ctx, n2); exists || err != nil {
		t.Errorf("n2 removed: exists=%v err=%v", exists, err)
	}
	if off, err := p.InstanceShutdown(ctx, n1); !off || err != nil {
		t.Errorf("n1 shut down: %v %v", off, err)
	}
	foreign := nodeWith("f")
	foreign.Spec.ProviderID = "aws:///i-123"
	if exists, _ := p.InstanceExists(ctx, foreign); !exists {
		t.Error("a node of another provider is not this one's to delete")
	}
	write("nodes:\n  n1:\n    internalIP: not-an-ip\n")
	if _, err := p.InstanceMetadata(ctx, n1); err == nil || !strings.Contains(err.Error(), "is not an IP address") {
		t.Errorf("bad file: %v", err)
	}
	write("zones: typo\n")
	if _, err := p.InstanceMetadata(ctx, n1); err == nil || !strings.Contains(err.Error(), "zones") {
		t.Errorf("unknown field: %v", err)
	}
}

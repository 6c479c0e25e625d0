package ccm

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/local"
)

func TestEnabled(t *testing.T) {
	on, err := enabled([]string{"*", "-route"})
	if err != nil {
		t.Fatal(err)
	}
	if !on[CloudNode] || !on[CloudNodeLifecycle] || !on[ServiceLB] || on[NodeRoute] {
		t.Errorf("*,-route: %v", on)
	}
	on, _ = enabled([]string{"service-lb-controller"})
	if !on[ServiceLB] || on[CloudNode] {
		t.Errorf("service-lb-controller: %v", on)
	}
	if _, err := enabled([]string{"bogus"}); err == nil || !strings.Contains(err.Error(), `unknown controller "bogus"`) {
		t.Errorf("bogus: %v", err)
	}
}

func TestNewProviderRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "--cloud-provider is required"},
		{Options{CloudProvider: "aws"}, `--cloud-provider "aws" is unknown`},
		{Options{CloudProvider: "local", Local: localOpts("10.0.0.0/33")}, "--lb-ip-pool"},
		{Options{CloudProvider: "local", ConfigureCloudRoutes: true, ClusterCIDR: "nope"}, "--cluster-cidr"},
	} {
		if _, err := NewProvider(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// The wiring end to end on a fake clientset: the local provider's node controller
// initializes a node registered with --cloud-provider external, and the service
// controller gives a LoadBalancer Service a pool address.
func TestStartControllers(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{cloud.AnnotationProvidedNodeIP: "192.0.2.1"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: cloud.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}}},
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}}}
	client := k8sfake.NewClientset(node, svc)
	opts := Options{CloudProvider: "local", Local: localOpts("10.250.152.0/30"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	provider, err := NewProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	on, _ := enabled(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := provider.Initialize(ctx, client); err != nil {
		t.Fatal(err)
	}
	if err := StartControllers(ctx, client, provider, on, opts); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		s, _ := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if n.Spec.ProviderID == "local://n1" && len(n.Spec.Taints) == 0 && len(s.Status.LoadBalancer.Ingress) == 1 {
			if ip := s.Status.LoadBalancer.Ingress[0].IP; ip != "10.250.152.1" {
				t.Errorf("ingress %s, want 10.250.152.1", ip)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %+v\nservice %+v", n.Spec, s.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func localOpts(pool string) local.Options { return local.Options{LBPool: pool} }

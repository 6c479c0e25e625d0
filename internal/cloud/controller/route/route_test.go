package route

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/fake"
)

func node(name, ip, cidr string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: v1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
}

func reconcile(t *testing.T, p *fake.Provider, objs ...runtime.Object) (*k8sfake.Clientset, []string) {
	t.Helper()
	client := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, p, "kubernetes", netip.MustParsePrefix("10.152.0.0/16"), factory.Core().V1().Nodes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(10)
	c.Events = events
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	close(events.Events)
	var out []string
	for e := range events.Events {
		out = append(out, e)
	}
	return client, out
}

func condition(t *testing.T, client *k8sfake.Clientset, name string) v1.NodeCondition {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeNetworkUnavailable {
			return c
		}
	}
	return v1.NodeCondition{}
}

func TestCreatesMissingAndDeletesStaleRoutes(t *testing.T) {
	p := &fake.Provider{RouteList: []*cloud.Route{
		// n2's route, known by its gateway only (as the local provider lists them).
		{Name: "10.152.2.0/24", DestinationCIDR: "10.152.2.0/24", TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.2"}}},
		{Name: "10.152.9.0/24", DestinationCIDR: "10.152.9.0/24"}, // no node has it
		{Name: "10.99.0.0/24", DestinationCIDR: "10.99.0.0/24"},   // outside the cluster CIDR
	}}
	client, _ := reconcile(t, p, node("n1", "192.0.2.1", "10.152.1.0/24"), node("n2", "192.0.2.2", "10.152.2.0/24"))
	calls := p.CallsSnapshot()
	for _, want := range []string{"CreateRoute n1 10.152.1.0/24", "DeleteRoute 10.152.9.0/24"} {
		if !slices.Contains(calls, want) {
			t.Errorf("calls %v, want %s", calls, want)
		}
	}
	for _, never := range []string{"CreateRoute n2 10.152.2.0/24", "DeleteRoute 10.99.0.0/24", "DeleteRoute 10.152.2.0/24"} {
		if slices.Contains(calls, never) {
			t.Errorf("calls %v include %s", calls, never)
		}
	}
	for _, n := range []string{"n1", "n2"} {
		c := condition(t, client, n)
		if c.Status != v1.ConditionFalse || c.Reason != "RouteCreated" || c.Message != "RouteController created a route" {
			t.Errorf("%s NetworkUnavailable %+v", n, c)
		}
	}
}

func TestFailedRouteIsReported(t *testing.T) {
	p := &fake.Provider{CreateErr: errors.New("network is unreachable")}
	client, events := reconcile(t, p, node("n1", "192.0.2.1", "10.152.1.0/24"))
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning FailedToCreateRoute Could not create route uid-n1 10.152.1.0/24 for node n1 after ") ||
		!strings.HasSuffix(events[0], ": network is unreachable") {
		t.Errorf("events %q", events)
	}
	c := condition(t, client, "n1")
	if c.Status != v1.ConditionTrue || c.Reason != "NoRouteCreated" || c.Message != "RouteController failed to create a route" {
		t.Errorf("NetworkUnavailable %+v", c)
	}
}

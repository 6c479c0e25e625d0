package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/fake"
)

func lbService(name string, mutate ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10",
			Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func readyNode(name, ip string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

type harness struct {
	c        *Controller
	client   *k8sfake.Clientset
	provider *fake.Provider
	events   *record.FakeRecorder
}

func newHarness(t *testing.T, p *fake.Provider, objs ...runtime.Object) *harness {
	t.Helper()
	client := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, p, "kubernetes", factory.Core().V1().Services(), factory.Core().V1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(100)
	c.Events = events
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	client.ClearActions()
	return &harness{c: c, client: client, provider: p, events: events}
}

func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes lists the API writes as "verb resource/subresource name: patch".
func (h *harness) writes() []string {
	var out []string
	for _, a := range h.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			res := a.GetResource().Resource
			if a.GetSubresource() != "" {
				res += "/" + a.GetSubresource()
			}
			out = append(out, "patch "+res+" "+a.GetName()+": "+string(a.GetPatch()))
		case k8stesting.CreateAction, k8stesting.UpdateAction, k8stesting.DeleteAction:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func TestEnsureAddsFinalizerStatusAndEvents(t *testing.T) {
	p := &fake.Provider{EnsureStatus: &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "198.51.100.7"}}}}
	h := newHarness(t, p, lbService("web"), readyNode("n1", "192.0.2.1"))
	if err := h.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`patch services web: {"metadata":{"finalizers":["service.kubernetes.io/load-balancer-cleanup"],"resourceVersion":"1"}}`,
		`patch services/status web: {"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.7"}]}}}`,
	}
	if got := h.writes(); !slices.Equal(got, want) {
		t.Errorf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantEvents := []string{"Normal EnsuringLoadBalancer Ensuring load balancer", "Normal EnsuredLoadBalancer Ensured load balancer"}
	if got := h.drainEvents(); !slices.Equal(got, wantEvents) {
		t.Errorf("events %q, want %q", got, wantEvents)
	}
	svc, _ := h.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != "198.51.100.7" {
		t.Errorf("status %+v", svc.Status.LoadBalancer)
	}
}

func TestProviderErrorIsAnEvent(t *testing.T) {
	p := &fake.Provider{EnsureErr: errors.New("the load balancer pool 10.0.0.0/30 is exhausted: all 2 addresses are in use")}
	h := newHarness(t, p, lbService("web"), readyNode("n1", "192.0.2.1"))
	if err := h.c.Sync(context.Background(), "default/web"); err == nil {
		t.Fatal("Sync succeeded, want the provider's error")
	}
	want := "Warning SyncLoadBalancerFailed Error syncing load balancer: failed to ensure load balancer: the load balancer pool 10.0.0.0/30 is exhausted: all 2 addresses are in use"
	if got := h.drainEvents(); !slices.Contains(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	for _, w := range h.writes() {
		if strings.Contains(w, "services/status") {
			t.Errorf("status written despite the failure: %s", w)
		}
	}
}

func TestNoNodesWarns(t *testing.T) {
	h := newHarness(t, &fake.Provider{}, lbService("web"))
	_ = h.c.Sync(context.Background(), "default/web")
	if got := h.drainEvents(); !slices.Contains(got, "Warning UnAvailableLoadBalancer There are no available nodes for LoadBalancer") {
		t.Errorf("events %q", got)
	}
}

func TestDeletionCleansUp(t *testing.T) {
	now := metav1.Now()
	svc := lbService("web", func(s *v1.Service) {
		s.Finalizers = []string{cloud.LoadBalancerCleanupFinalizer}
		s.DeletionTimestamp = &now
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	})
	p := &fake.Provider{Balancers: map[string]*v1.LoadBalancerStatus{"default/web": {}}}
	h := newHarness(t, p, svc)
	if err := h.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.CallsSnapshot(), "EnsureLoadBalancerDeleted default/web") {
		t.Errorf("calls %v: the load balancer was not deleted", p.CallsSnapshot())
	}
	want := `patch services web: {"metadata":{"finalizers":[],"resourceVersion":"1"}}`
	if got := h.writes(); len(got) == 0 || got[0] != want {
		t.Errorf("writes %q, want first %s", got, want)
	}
	wantEvents := []string{"Normal DeletingLoadBalancer Deleting load balancer", "Normal DeletedLoadBalancer Deleted load balancer"}
	if got := h.drainEvents(); !slices.Equal(got, wantEvents) {
		t.Errorf("events %q, want %q", got, wantEvents)
	}
}

func TestTypeChangeReleasesTheLoadBalancer(t *testing.T) {
	svc := lbService("web", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Finalizers = []string{cloud.LoadBalancerCleanupFinalizer}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	})
	p := &fake.Provider{Balancers: map[string]*v1.LoadBalancerStatus{"default/web": {}}}
	h := newHarness(t, p, svc)
	if err := h.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	got := h.writes()
	want := []string{
		`patch services web: {"metadata":{"finalizers":[],"resourceVersion":"1"}}`,
		`patch services/status web: {"status":{"loadBalancer":{"ingress":null}}}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadBalancerClassIsAnotherImplementations(t *testing.T) {
	class := "example.com/lb"
	p := &fake.Provider{}
	h := newHarness(t, p, lbService("web", func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }), readyNode("n1", "192.0.2.1"))
	if err := h.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	for _, call := range p.CallsSnapshot() {
		if strings.HasPrefix(call, "EnsureLoadBalancer ") {
			t.Errorf("a Service with loadBalancerClass %s was given a load balancer", class)
		}
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("writes %q, want none", w)
	}
}

func TestNodeChangesUpdateHosts(t *testing.T) {
	p := &fake.Provider{}
	n1 := readyNode("n1", "192.0.2.1")
	excluded := readyNode("n3", "192.0.2.3")
	excluded.Labels = map[string]string{cloud.LabelExcludeFromLoadBalancers: ""}
	h := newHarness(t, p, lbService("web"), n1, excluded)
	ctx := context.Background()
	if err := h.c.Sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	// The finalizer write reaches the informer; node n2 joins.
	if _, err := h.client.CoreV1().Nodes().Create(ctx, readyNode("n2", "192.0.2.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		nodes, _ := h.c.nodes.List(labels.Everything())
		svc, _ := h.c.services.Services("default").Get("web")
		if len(nodes) == 3 && svc != nil && hasFinalizer(svc) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("informers did not catch up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.c.SyncNodes(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.UpdatedHosts["default/web"]; !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("hosts %v, want [n1 n2] (n3 is excluded)", got)
	}
	if got := h.drainEvents(); !slices.Contains(got, "Normal UpdatedLoadBalancer Updated load balancer with new hosts") {
		t.Errorf("events %q", got)
	}
	p.Calls = nil
	if err := h.c.SyncNodes(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.CallsSnapshot(), "UpdateLoadBalancer default/web") {
		t.Error("an unchanged node set updated the load balancer again")
	}
}

func TestChangesAreReportedAsUpstream(t *testing.T) {
	h := newHarness(t, &fake.Provider{})
	old := lbService("web", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	cur := lbService("web")
	if !h.c.needsUpdate(old, cur) {
		t.Error("NodePort -> LoadBalancer needs no update?")
	}
	local := lbService("web", func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal })
	if !h.c.needsUpdate(cur, local) {
		t.Error("a traffic policy change needs no update?")
	}
	statusOnly := lbService("web", func(s *v1.Service) { s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.7"}} })
	if h.c.needsUpdate(cur, statusOnly) {
		t.Error("this controller's own status write needs an update")
	}
	want := []string{"Normal Type NodePort -> LoadBalancer", "Normal ExternalTrafficPolicy  -> Local"}
	if got := h.drainEvents(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

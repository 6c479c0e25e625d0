package endpointslice

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var created = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func service(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: "svc-uid", Labels: map[string]string{"team": "web"}, CreationTimestamp: created},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name}, ClusterIP: "10.96.0.10", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func pod(name, app, ip string, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}, CreationTimestamp: created},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func zonedNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
}

type fixture struct {
	names  []string // names the fake apiserver generated, in order
	client *fake.Clientset
	inf    informers.SharedInformerFactory
	c      *Controller
}

func newFixture(observed ...runtime.Object) *fixture {
	client := fake.NewClientset(observed...)
	f := &fixture{client: client}
	generated := 0
	client.PrependReactor("create", "endpointslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.CreateAction).GetObject().(*discovery.EndpointSlice)
		if s.Name == "" {
			generated++
			s.Name = fmt.Sprintf("%sgen%d", s.GenerateName, generated)
		}
		f.names = append(f.names, s.Name)
		return false, nil, nil
	})
	inf := informers.NewSharedInformerFactory(client, 0)
	c := New(client, inf.Core().V1().Services(), inf.Core().V1().Pods(), inf.Core().V1().Nodes(), inf.Discovery().V1().EndpointSlices())
	for _, o := range observed {
		switch o.(type) {
		case *corev1.Service:
			inf.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			inf.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.Node:
			inf.Core().V1().Nodes().Informer().GetIndexer().Add(o)
		case *discovery.EndpointSlice:
			inf.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(o)
		}
	}
	client.ClearActions()
	f.inf, f.c = inf, c
	return f
}

// writes summarises the slice writes as "verb name (n endpoints)".
func (f *fixture) writes() (out []string, objs []*discovery.EndpointSlice) {
	creates := 0
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			s := a.GetObject().(*discovery.EndpointSlice)
			if s.Name == "" && a.GetVerb() == "create" {
				s.Name = f.names[creates]
			}
			if a.GetVerb() == "create" {
				creates++
			}
			out = append(out, fmt.Sprintf("%s %s (%d)", a.GetVerb(), s.Name, len(s.Endpoints)))
			objs = append(objs, s)
		case clienttesting.DeleteAction:
			out = append(out, "delete "+a.GetName())
		}
	}
	return out, objs
}

func TestNewServiceGetsOneSliceWithEveryPod(t *testing.T) {
	f := newFixture(service("cart"), zonedNode(),
		pod("cart-a", "cart", "10.0.0.1", true),
		pod("cart-b", "cart", "10.0.0.2", false),
		pod("cart-c", "cart", "10.0.0.3", true, func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }),
		pod("cart-done", "cart", "10.0.0.4", true, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("other", "payments", "10.0.0.9", true))
	if err := f.c.sync(context.Background(), "shop/cart"); err != nil {
		t.Fatal(err)
	}
	writes, objs := f.writes()
	if !slices.Equal(writes, []string{"create cart-gen1 (3)"}) {
		t.Fatalf("writes %v, want one slice of 3 endpoints", writes)
	}
	s := objs[0]
	if s.Labels[discovery.LabelServiceName] != "cart" || s.Labels[discovery.LabelManagedBy] != "endpointslice-controller.k8s.io" || s.Labels["team"] != "web" {
		t.Errorf("labels %v", s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].UID != "svc-uid" || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}
	if s.AddressType != discovery.AddressTypeIPv4 || len(s.Ports) != 1 || *s.Ports[0].Port != 8080 || *s.Ports[0].Name != "http" {
		t.Errorf("address type %s ports %+v", s.AddressType, s.Ports)
	}
	if s.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] == "" {
		t.Error("no last-change-trigger-time annotation")
	}
	type cond struct{ ready, serving, terminating bool }
	want := map[string]cond{"cart-a": {true, true, false}, "cart-b": {false, false, false}, "cart-c": {false, true, true}}
	for _, e := range s.Endpoints {
		got := cond{*e.Conditions.Ready, *e.Conditions.Serving, *e.Conditions.Terminating}
		if got != want[e.TargetRef.Name] {
			t.Errorf("endpoint %s conditions %+v, want %+v", e.TargetRef.Name, got, want[e.TargetRef.Name])
		}
		if e.Zone == nil || *e.Zone != "zone-a" || e.NodeName == nil || *e.NodeName != "node-1" {
			t.Errorf("endpoint %s zone/node %v/%v", e.TargetRef.Name, e.Zone, e.NodeName)
		}
	}
}

func TestSliceWrites(t *testing.T) {
	many := func(n int) []runtime.Object {
		objs := []runtime.Object{service("big")}
		for i := range n {
			objs = append(objs, pod(fmt.Sprintf("big-%03d", i), "big", fmt.Sprintf("10.1.%d.%d", i/200, i%200+1), true))
		}
		return objs
	}
	managed := func(name string, eps ...string) *discovery.EndpointSlice {
		s := newSlice(service("cart"), discovery.AddressTypeIPv4, []discovery.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}})
		s.Name = name
		for _, p := range eps {
			s.Endpoints = append(s.Endpoints, readyEndpoint(pod(p, "cart", ipOf[p], true)))
		}
		return s
	}
	tests := []struct {
		story    string
		observed []runtime.Object
		service  string
		want     []string
	}{
		{"250 pods are spread over slices of at most 100", many(250), "big",
			[]string{"create big-gen1 (100)", "create big-gen2 (100)", "create big-gen3 (50)"}},
		{"a service with no pods gets one empty placeholder slice", []runtime.Object{service("cart")}, "cart",
			[]string{"create cart-gen1 (0)"}},
		{"slices already right are not rewritten",
			[]runtime.Object{service("cart"), pod("cart-a", "cart", "10.0.0.1", true), managed("cart-x", "cart-a")}, "cart", nil},
		{"a pod that went away is removed from its slice",
			[]runtime.Object{service("cart"), pod("cart-a", "cart", "10.0.0.1", true), managed("cart-x", "cart-a", "cart-b")}, "cart",
			[]string{"update cart-x (1)"}},
		{"a new pod joins the slice with room instead of a new slice",
			[]runtime.Object{service("cart"), pod("cart-a", "cart", "10.0.0.1", true), pod("cart-b", "cart", "10.0.0.2", true), managed("cart-x", "cart-a")}, "cart",
			[]string{"update cart-x (2)"}},
		{"when the last pod goes, the placeholder replaces the slice",
			[]runtime.Object{service("cart"), managed("cart-x", "cart-a")}, "cart",
			[]string{"create cart-gen1 (0)", "delete cart-x"}},
		{"slices of a deleted service are removed", []runtime.Object{managed("cart-x", "cart-a")}, "cart",
			[]string{"delete cart-x"}},
		{"a service without a selector keeps its hand-made slices",
			[]runtime.Object{service("cart", func(s *corev1.Service) { s.Spec.Selector = nil }), pod("cart-a", "cart", "10.0.0.1", true),
				func() *discovery.EndpointSlice {
					s := managed("cart-manual")
					s.Labels[discovery.LabelManagedBy] = "someone-else"
					return s
				}()}, "cart", nil},
		{"a dual-stack service gets one slice per family",
			[]runtime.Object{service("cart", func(s *corev1.Service) {
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			}), pod("cart-a", "cart", "10.0.0.1", true, func(p *corev1.Pod) {
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
			})}, "cart",
			[]string{"create cart-gen1 (1)", "create cart-gen2 (1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newFixture(tt.observed...)
			if err := f.c.sync(context.Background(), "shop/"+tt.service); err != nil {
				t.Fatal(err)
			}
			got, _ := f.writes()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("writes\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

var ipOf = map[string]string{"cart-a": "10.0.0.1", "cart-b": "10.0.0.2"}

// readyEndpoint builds an endpoint the way the controller would for a node it
// does not know, for slices that existed before the test.
func readyEndpoint(p *corev1.Pod) discovery.Endpoint {
	ep := discovery.Endpoint{
		Addresses:  []string{p.Status.PodIP},
		Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		NodeName:   ptr(p.Spec.NodeName),
	}
	return ep
}

// Until the informer shows the slice just created, a second sync must not create
// another one.
func TestNoDuplicateSlicesWhileTheCacheLags(t *testing.T) {
	f := newFixture(service("cart"), pod("cart-a", "cart", "10.0.0.1", true))
	ctx := context.Background()
	if err := f.c.sync(ctx, "shop/cart"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(ctx, "shop/cart"); err == nil {
		t.Fatal("second sync on a stale cache succeeded; want a retry")
	}
	got, _ := f.writes()
	if len(got) != 1 {
		t.Fatalf("writes %v, want a single create", got)
	}
	s, err := f.client.DiscoveryV1().EndpointSlices("shop").Get(ctx, "cart-gen1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.inf.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(s)
	f.client.ClearActions()
	if err := f.c.sync(ctx, "shop/cart"); err != nil {
		t.Fatalf("sync after the cache caught up: %v", err)
	}
	if got, _ := f.writes(); len(got) != 0 {
		t.Fatalf("writes %v after catching up, want none", got)
	}
}

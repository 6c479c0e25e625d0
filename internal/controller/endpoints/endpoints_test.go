package endpoints

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"team": "web"}, CreationTimestamp: created},
		Spec: corev1.ServiceSpec{
			Selector:  map[string]string{"app": name},
			ClusterIP: "10.96.0.10",
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
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
			{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(created.Add(time.Minute))},
		}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func addr(ip, podName string) corev1.EndpointAddress {
	node := "node-1"
	return corev1.EndpointAddress{IP: ip, NodeName: &node,
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: podName, UID: types.UID("uid-" + podName)}}
}

var httpPort = []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}

type fixture struct {
	client *fake.Clientset
	c      *Controller
}

func newFixture(observed ...runtime.Object) *fixture {
	client := fake.NewClientset(observed...)
	inf := informers.NewSharedInformerFactory(client, 0)
	c := New(client, inf.Core().V1().Services(), inf.Core().V1().Pods(), inf.Core().V1().Endpoints())
	for _, o := range observed {
		switch o.(type) {
		case *corev1.Service:
			inf.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			inf.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.Endpoints:
			inf.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
		}
	}
	client.ClearActions()
	return &fixture{client: client, c: c}
}

func TestEndpointsFollowPods(t *testing.T) {
	tests := []struct {
		story       string
		observed    []runtime.Object
		want        []corev1.EndpointSubset // nil with wantNoWrite: nothing written
		wantNoWrite bool
		wantLabels  map[string]string
	}{
		{
			story: "ready pods are addresses, unready ones not-ready addresses, with the named port resolved",
			observed: []runtime.Object{service("cart"),
				pod("cart-b", "cart", "10.0.0.2", true), pod("cart-a", "cart", "10.0.0.1", false),
				pod("other", "payments", "10.0.0.9", true), pod("no-ip", "cart", "", true)},
			want: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "cart-b")},
				NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")}, Ports: httpPort}},
			wantLabels: map[string]string{"team": "web"},
		},
		{
			story: "a numeric target port is used as is",
			observed: []runtime.Object{service("cart", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9090) }),
				pod("cart-a", "cart", "10.0.0.1", true)},
			want: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")},
				Ports: []corev1.EndpointPort{{Name: "http", Port: 9090, Protocol: corev1.ProtocolTCP}}}},
			wantLabels: map[string]string{"team": "web"},
		},
		{
			story: "pods that name the port differently land in their own subset; pods without it are left out",
			observed: []runtime.Object{service("cart"),
				pod("cart-a", "cart", "10.0.0.1", true),
				pod("cart-new", "cart", "10.0.0.2", true, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 8081 }),
				pod("cart-odd", "cart", "10.0.0.3", true, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "metrics" })},
			want: []corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")}, Ports: httpPort},
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "cart-new")}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8081, Protocol: corev1.ProtocolTCP}}},
			},
			wantLabels: map[string]string{"team": "web"},
		},
		{
			story: "publishNotReadyAddresses lists unready pods as ready",
			observed: []runtime.Object{service("cart", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
				pod("cart-a", "cart", "10.0.0.1", false)},
			want:       []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")}, Ports: httpPort}},
			wantLabels: map[string]string{"team": "web"},
		},
		{
			story: "a headless service without ports still lists addresses, with hostnames, and is labelled headless",
			observed: []runtime.Object{service("db", func(s *corev1.Service) { s.Spec.ClusterIP = "None"; s.Spec.Ports = nil }),
				pod("db-0", "db", "10.0.0.5", true, func(p *corev1.Pod) { p.Spec.Hostname = "db-0"; p.Spec.Subdomain = "db" })},
			want: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{func() corev1.EndpointAddress {
				a := addr("10.0.0.5", "db-0")
				a.Hostname = "db-0"
				return a
			}()}}},
			wantLabels: map[string]string{"team": "web", "service.kubernetes.io/headless": ""},
		},
		{
			story: "terminating and finished pods are not endpoints",
			observed: []runtime.Object{service("cart"),
				pod("cart-a", "cart", "10.0.0.1", true, func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }),
				pod("cart-b", "cart", "10.0.0.2", false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
			want:       nil,
			wantLabels: map[string]string{"team": "web"},
		},
		{
			story:       "a service without a selector is left alone",
			observed:    []runtime.Object{service("external", func(s *corev1.Service) { s.Spec.Selector = nil }), pod("x", "external", "10.0.0.1", true)},
			wantNoWrite: true,
		},
		{
			story: "endpoints already up to date are not rewritten",
			observed: []runtime.Object{service("cart"), pod("cart-a", "cart", "10.0.0.1", true),
				&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", Labels: map[string]string{"team": "web"}},
					Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")}, Ports: httpPort}}}},
			wantNoWrite: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newFixture(tt.observed...)
			var svcName string
			for _, o := range tt.observed {
				if s, ok := o.(*corev1.Service); ok {
					svcName = s.Name
				}
			}
			if err := f.c.sync(context.Background(), "shop/"+svcName); err != nil {
				t.Fatalf("sync: %v", err)
			}
			writes := f.client.Actions()
			if tt.wantNoWrite {
				if len(writes) != 0 {
					t.Fatalf("wrote %v, want nothing", writes)
				}
				return
			}
			if len(writes) != 1 {
				t.Fatalf("actions %v, want one write", writes)
			}
			ep := writes[0].(clienttesting.CreateAction).GetObject().(*corev1.Endpoints)
			if !apiequality.Semantic.DeepEqual(ep.Subsets, tt.want) {
				t.Errorf("subsets\n got %+v\nwant %+v", ep.Subsets, tt.want)
			}
			if !apiequality.Semantic.DeepEqual(ep.Labels, tt.wantLabels) {
				t.Errorf("labels %v, want %v", ep.Labels, tt.wantLabels)
			}
			if ep.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] == "" {
				t.Errorf("no last-change-trigger-time annotation")
			}
		})
	}
}

func TestChangedPodsUpdateEndpointsAndDeletedServicesDeleteThem(t *testing.T) {
	stale := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", Labels: map[string]string{"team": "web"}},
		Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.1", "cart-a")}, Ports: httpPort}}}
	f := newFixture(service("cart"), pod("cart-a", "cart", "10.0.0.1", true), stale)
	if err := f.c.sync(context.Background(), "shop/cart"); err != nil {
		t.Fatal(err)
	}
	ep, _ := f.client.CoreV1().Endpoints("shop").Get(context.Background(), "cart", metav1.GetOptions{})
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || len(ep.Subsets[0].NotReadyAddresses) != 0 {
		t.Fatalf("after the pod became ready, subsets = %+v", ep.Subsets)
	}

	f = newFixture(stale)
	if err := f.c.sync(context.Background(), "shop/cart"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Endpoints("shop").Get(context.Background(), "cart", metav1.GetOptions{}); err == nil {
		t.Fatal("endpoints of a deleted service still exist")
	}
}

func TestOverCapacityIsTruncated(t *testing.T) {
	objs := []runtime.Object{service("big")}
	for i := range maxAddresses + 5 {
		objs = append(objs, pod("big-"+itoa(i), "big", "10.1."+itoa(i/250)+"."+itoa(i%250+1), true))
	}
	f := newFixture(objs...)
	if err := f.c.sync(context.Background(), "shop/big"); err != nil {
		t.Fatal(err)
	}
	ep, _ := f.client.CoreV1().Endpoints("shop").Get(context.Background(), "big", metav1.GetOptions{})
	if n := len(ep.Subsets[0].Addresses); n != maxAddresses {
		t.Errorf("%d addresses, want %d", n, maxAddresses)
	}
	if ep.Annotations["endpoints.kubernetes.io/over-capacity"] != "truncated" {
		t.Errorf("annotations %v lack over-capacity=truncated", ep.Annotations)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

package endpointslicemirroring

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func customService(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "example", Port: 80}}}}
}

func customEndpoints(name string, ips ...string) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "ep-uid", Labels: map[string]string{"team": "web"}}}
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}
	for _, ip := range ips {
		subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip})
	}
	subset.NotReadyAddresses = []corev1.EndpointAddress{{IP: "fd00::9"}}
	ep.Subsets = []corev1.EndpointSubset{subset}
	return ep
}

// syncOnce runs one sync of ns/name against the objects, with informers filled from the
// fake clientset, and returns the slices the clientset holds afterwards.
func syncOnce(t *testing.T, client *fake.Clientset, name string) []discovery.EndpointSlice {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f.Core().V1().Services(), f.Core().V1().Endpoints(), f.Discovery().V1().EndpointSlices())
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if err := c.sync(ctx, "ns/"+name); err != nil {
		t.Fatal(err)
	}
	list, err := client.DiscoveryV1().EndpointSlices("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// newClient is a fake clientset that names objects from their generateName, as the
// apiserver does.
func newClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	n := 0
	client.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		obj := action.(clienttesting.CreateAction).GetObject().(metav1.Object)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			n++
			obj.SetName(fmt.Sprintf("%s%d", obj.GetGenerateName(), n))
		}
		return false, nil, nil
	})
	return client
}

func TestMirrorsCustomEndpointsThroughTheirLife(t *testing.T) {
	client := newClient(customService("custom", nil), customEndpoints("custom", "10.1.2.3"))
	slices := syncOnce(t, client, "custom")
	if len(slices) != 2 {
		t.Fatalf("slices after creation: %d, want one IPv4 and one IPv6", len(slices))
	}
	var v4 discovery.EndpointSlice
	for _, s := range slices {
		if s.Labels[discovery.LabelServiceName] != "custom" || s.Labels[discovery.LabelManagedBy] != ManagedBy || s.Labels["team"] != "web" {
			t.Errorf("slice labels %v", s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Endpoints" || s.OwnerReferences[0].UID != "ep-uid" {
			t.Errorf("slice owners %v", s.OwnerReferences)
		}
		if s.AddressType == discovery.AddressTypeIPv4 {
			v4 = s
		} else if len(s.Endpoints) != 1 || *s.Endpoints[0].Conditions.Ready {
			t.Errorf("IPv6 slice %+v: want the not-ready fd00::9", s.Endpoints)
		}
	}
	if len(v4.Ports) != 1 || *v4.Ports[0].Port != 80 || len(v4.Endpoints) != 1 || v4.Endpoints[0].Addresses[0] != "10.1.2.3" || !*v4.Endpoints[0].Conditions.Ready {
		t.Fatalf("IPv4 slice ports %+v endpoints %+v", v4.Ports, v4.Endpoints)
	}

	// An update moves the address in the same slice.
	if _, err := client.CoreV1().Endpoints("ns").Update(context.Background(), customEndpoints("custom", "10.2.3.4"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices = syncOnce(t, client, "custom")
	for _, s := range slices {
		if s.Name == v4.Name && s.Endpoints[0].Addresses[0] != "10.2.3.4" {
			t.Errorf("after the update the IPv4 slice lists %v", s.Endpoints[0].Addresses)
		}
	}
	if len(slices) != 2 {
		t.Errorf("slices after the update: %d, want 2", len(slices))
	}

	// Deleting the Endpoints deletes its slices.
	if err := client.CoreV1().Endpoints("ns").Delete(context.Background(), "custom", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if slices = syncOnce(t, client, "custom"); len(slices) != 0 {
		t.Errorf("slices after the Endpoints' deletion: %d, want none", len(slices))
	}
}

func TestLeavesSelectorServicesAndSkipMirrorAlone(t *testing.T) {
	skipped := customEndpoints("skipped", "10.1.2.3")
	skipped.Labels[discovery.LabelSkipMirror] = "true"
	objs := []runtime.Object{customService("selecting", map[string]string{"app": "x"}), customEndpoints("selecting", "10.1.2.3"),
		customService("skipped", nil), skipped, customEndpoints("orphan", "10.1.2.3")}
	client := newClient(objs...)
	for _, name := range []string{"selecting", "skipped", "orphan"} {
		if slices := syncOnce(t, client, name); len(slices) != 0 {
			t.Errorf("%s: %d slices mirrored, want none", name, len(slices))
		}
	}
}

package hostservice

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeClock is one host's clock, moved by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func publishAt(t *testing.T, client kubernetes.Interface, ip string, port int32, clock *fakeClock) *Publisher {
	t.Helper()
	p, err := Publish(context.Background(), client, Spec{Namespace: "kube-system", Name: "kube-dns", ClusterIP: "10.96.0.10",
		Ports:   []Port{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: port}},
		Address: net.ParseIP(ip), ManagedBy: "mizzen-dns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.now = clock.now
	return p
}

// endpointsOf lists "slice=address:port" for the Service's slices.
func endpointsOf(t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	list, err := client.DiscoveryV1().EndpointSlices("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		port := "none"
		if len(s.Ports) > 0 {
			port = strconv.Itoa(int(*s.Ports[0].Port))
		}
		for _, ep := range s.Endpoints {
			out = append(out, s.Name+"="+ep.Addresses[0]+":"+port)
		}
	}
	slices.Sort(out)
	return out
}

// TestSeveralHosts: every host publishing is in the Service with its own address and
// port; a host that withdraws leaves at once; a host whose Lease stops moving is swept
// by another after the Lease's duration on the sweeper's clock, not before, and comes
// back when it renews; a slice without a Lease (an older version's) goes the same way.
func TestSeveralHosts(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "mizzen-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.9"}}},
	})
	clockA, clockB, clockC := &fakeClock{time.Unix(1000, 0)}, &fakeClock{time.Unix(5000, 0)}, &fakeClock{time.Unix(9000, 0)}
	a := publishAt(t, client, "192.0.2.1", 5301, clockA)
	b := publishAt(t, client, "192.0.2.2", 5302, clockB)
	c := publishAt(t, client, "192.0.2.3", 5303, clockC)
	if got := endpointsOf(t, client); !slices.Equal(got, []string{"kube-dns-192-0-2-1=192.0.2.1:5301", "kube-dns-192-0-2-2=192.0.2.2:5302",
		"kube-dns-192-0-2-3=192.0.2.3:5303", "kube-dns=192.0.2.9:none"}) {
		t.Fatalf("three hosts and an older version's slice: %v", got)
	}

	// A first look records; nothing is swept before a full duration without change.
	for _, p := range []*Publisher{a, b} {
		if err := p.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clockA.t = clockA.t.Add(LeaseDuration - time.Second)
	clockB.t = clockB.t.Add(LeaseDuration - time.Second)
	clockC.t = clockC.t.Add(LeaseDuration - time.Second)
	for _, p := range []*Publisher{a, b} { // c has stopped renewing: it was killed
		if err := p.renew(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(endpointsOf(t, client)); n != 4 {
		t.Fatalf("swept before the lease's duration: %v", endpointsOf(t, client))
	}
	// Past the duration on a's clock: c's slice and the old unleased one go.
	clockA.t = clockA.t.Add(2 * time.Second)
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := endpointsOf(t, client)
	if !slices.Equal(got, []string{"kube-dns-192-0-2-1=192.0.2.1:5301", "kube-dns-192-0-2-2=192.0.2.2:5302"}) {
		t.Fatalf("after c stopped renewing: %v", got)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-dns-192-0-2-3", metav1.GetOptions{}); err == nil {
		t.Error("the swept host's Lease is left")
	}
	// b renews between a's sweeps: a's sweeps leave it however long a's clock runs.
	for range 3 {
		clockA.t = clockA.t.Add(time.Hour)
		clockB.t = clockB.t.Add(RenewInterval)
		if err := b.renew(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(endpointsOf(t, client)) != 2 {
		t.Fatalf("a live host swept: %v", endpointsOf(t, client))
	}
	// c restarts: it is back.
	c.now = (&fakeClock{time.Unix(20000, 0)}).now
	if err := c.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if len(endpointsOf(t, client)) != 3 {
		t.Fatalf("c back: %v", endpointsOf(t, client))
	}
	// b stops: it withdraws and leaves at once.
	stop := b.Start(ctx)
	stop()
	got = endpointsOf(t, client)
	if !slices.Equal(got, []string{"kube-dns-192-0-2-1=192.0.2.1:5301", "kube-dns-192-0-2-3=192.0.2.3:5303"}) {
		t.Fatalf("after b withdrew: %v", got)
	}
}

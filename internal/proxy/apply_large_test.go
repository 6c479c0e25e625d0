package proxy

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestApplyLargeRuleset writes a table of a few hundred services, rewrites it, and
// deletes it: the kernel acknowledges each message of the one batch, and all those
// acknowledgements must fit the socket's receive buffer, or every sync fails with
// ENOBUFS once a cluster has that many services (the fault suite saw it with dozens).
func TestApplyLargeRuleset(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	ns := fmt.Sprintf("mzpbig%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	nsFile, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	tbl := Table{NetNS: int(nsFile.Fd())}

	in := Input{NodeName: "node-a"}
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("svc-%d", i)
		in.Services = append(in.Services, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		})
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Protocol: ptrTo(v1.ProtocolTCP), Port: ptrTo[int32](8080)}},
		}
		for e := 0; e < 3; e++ {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", e, i%250+1)}, NodeName: ptrTo("node-a")})
		}
		in.EndpointSlices = append(in.EndpointSlices, slice)
	}
	rs := Build(in)
	for i := 0; i < 2; i++ { // creating the table, then replacing everything in it
		if err := tbl.Apply(rs); err != nil {
			t.Fatalf("apply %d of %d chains: %v", i+1, len(rs.Chains), err)
		}
	}
	if err := tbl.Delete(); err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

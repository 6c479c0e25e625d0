package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// TestKubernetesServiceEndpoints: default/kubernetes's Endpoints and EndpointSlice list
// the running apiserver's advertised address and port, and a stopped apiserver takes
// its address out, so in-cluster clients are not sent to it.
func TestKubernetesServiceEndpoints(t *testing.T) {
	dir := t.TempDir()
	start := func(advertise string) (*apiserver.Server, kubernetes.Interface) {
		srv := apiserver.StartWithOptions(t, func(o *core.Options) { o.DataDir, o.AdvertiseAddress = dir, advertise })
		return srv, kubernetes.NewForConfigOrDie(srv.AdminConfig)
	}
	srv, client := start("10.20.30.1")
	if got := waitEndpoints(t, client, srv, "10.20.30.1"); got != "[10.20.30.1]" {
		t.Fatalf("endpoints %s, want [10.20.30.1]", got)
	}
	srv.Stop()

	// The restarted server's first write lists every live address: without the first
	// server's withdrawal, its lease would still be alive (15 s) and be listed too.
	srv, client = start("10.20.30.2")
	if got := waitEndpoints(t, client, srv, "10.20.30.2"); got != "[10.20.30.2]" {
		t.Fatalf("after a restart the endpoints are %s, want only [10.20.30.2]: the stopped server was not withdrawn", got)
	}
}

// waitEndpoints waits until the Endpoints and the EndpointSlice of the kubernetes Service
// both list ip, the same addresses and the server's port, and returns those addresses.
func waitEndpoints(t *testing.T, client kubernetes.Interface, srv *apiserver.Server, ip string) string {
	t.Helper()
	port := srv.URL[len("https://127.0.0.1:"):]
	ctx := context.Background()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ep, err := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		var epIPs, sliceIPs []string
		var epPort, slicePort string
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				epIPs = append(epIPs, a.IP)
			}
			for _, p := range ss.Ports {
				epPort = strconv.Itoa(int(p.Port))
			}
		}
		for _, e := range slice.Endpoints {
			sliceIPs = append(sliceIPs, e.Addresses...)
		}
		for _, p := range slice.Ports {
			slicePort = strconv.Itoa(int(*p.Port))
		}
		last = fmt.Sprintf("endpoints %v port %s, slice %v port %s (labels %v)", epIPs, epPort, sliceIPs, slicePort, slice.Labels)
		if slices.Contains(epIPs, ip) && fmt.Sprint(epIPs) == fmt.Sprint(sliceIPs) && epPort == port && slicePort == port &&
			slice.Labels["kubernetes.io/service-name"] == "kubernetes" {
			return fmt.Sprint(epIPs)
		}
	}
	t.Fatalf("the kubernetes service's endpoints did not come to list %s on port %s: %s", ip, port, last)
	return ""
}

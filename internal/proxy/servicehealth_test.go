package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func localLB(name string, hcPort int32) *v1.Service {
	svc := labService(name, "10.96.0.30", v1.ServiceTypeLoadBalancer)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = hcPort
	return svc
}

// sliceOn is an EndpointSlice of service with one endpoint per address, on node,
// ready unless listed in notReady.
func sliceOn(service, node string, addrs []string, notReady ...string) *discoveryv1.EndpointSlice {
	s := labSlice(service)
	s.Name = service + "-" + node
	for _, a := range addrs {
		ready := true
		for _, nr := range notReady {
			ready = ready && nr != a
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}})
	}
	return s
}

func TestHealthCheckServices(t *testing.T) {
	cluster := localLB("cluster", 31001)
	cluster.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	nodePort := localLB("nodeport", 31002)
	nodePort.Spec.Type = v1.ServiceTypeNodePort
	in := Input{
		NodeName: "node-a",
		Services: []*v1.Service{localLB("web", 31000), localLB("empty", 31003), cluster, nodePort},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			sliceOn("web", "node-a", []string{"10.244.1.5", "10.244.1.6", "10.244.1.7"}, "10.244.1.7"),
			sliceOn("web", "node-b", []string{"10.244.2.5"}),
			sliceOn("empty", "node-b", []string{"10.244.2.6"}),
			sliceOn("cluster", "node-a", []string{"10.244.1.8"}),
		},
	}
	got := HealthCheckServices(in)
	want := map[uint16]ServiceHealth{
		31000: {Namespace: "lab", Name: "web", LocalEndpoints: 2},
		31003: {Namespace: "lab", Name: "empty", LocalEndpoints: 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestServiceHealthCheckPorts runs the proxy and asks a healthCheckNodePort as a load
// balancer would.
func TestServiceHealthCheckPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := localLB("web", int32(port))
	client := fake.NewClientset(svc, sliceOn("web", "node-a", []string{"10.244.1.5"}))
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Client: client, NodeName: "node-a", MinSyncPeriod: 10 * time.Millisecond,
			Writer: &recorder{}, Conntrack: &clearedConntrack{cleared: map[netip.AddrPort]bool{}}, serviceHealthHost: "127.0.0.1"})
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	ask := func() (int, serviceHealthBody, error) {
		var body serviceHealthBody
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return 0, body, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, body, err
		}
		return resp.StatusCode, body, json.Unmarshal(data, &body)
	}
	waitFor := func(what string, ok func(code int, body serviceHealthBody, err error) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body, err := ask()
			if ok(code, body, err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health check port never showed %s: last %d %+v %v", what, code, body, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("one local endpoint", func(code int, b serviceHealthBody, err error) bool {
		return err == nil && code == http.StatusOK && b.LocalEndpoints == 1 && b.Service.Name == "web" && b.Service.Namespace == "lab" && b.ServiceProxyHealthy
	})
	if _, err := client.DiscoveryV1().EndpointSlices("lab").Update(ctx, sliceOn("web", "node-a", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("no local endpoint (503)", func(code int, b serviceHealthBody, err error) bool {
		return err == nil && code == http.StatusServiceUnavailable && b.LocalEndpoints == 0
	})
	if err := client.CoreV1().Services("lab").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the port closed", func(_ int, _ serviceHealthBody, err error) bool { return err != nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

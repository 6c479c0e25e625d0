package hollow

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/kubelet"
)

// TestNodeClientsOwnConnections checks that hollow kubelets' clients reach the
// apiserver over connections of their own, as separate kubelet processes do, where
// clients made from equal configs would share client-go's cached transport and so one
// HTTP/2 connection.
func TestNodeClientsOwnConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("request over %s, want HTTP/2", r.Proto)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c] = true
			mu.Unlock()
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}
	connections := func(cfg func() *rest.Config) int {
		t.Helper()
		mu.Lock()
		clear(conns)
		mu.Unlock()
		var clients []kubernetes.Interface // kept alive until every request is made
		for range 3 {
			c, err := kubernetes.NewForConfig(cfg())
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
			if _, err := c.Discovery().ServerVersion(); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	// The control: client-go shares one transport among equal configs.
	if n := connections(func() *rest.Config { return rest.CopyConfig(base) }); n != 1 {
		t.Errorf("3 clients of equal plain configs opened %d connections; the test expects client-go to share 1", n)
	}
	if n := connections(func() *rest.Config { return nodeConfig(base) }); n != 3 {
		t.Errorf("3 hollow node clients opened %d connections, want 3 (one each)", n)
	}
}

// TestNodeClientsRateAsRealKubelets checks that a hollow kubelet's client may send
// requests at a real kubelet's default rate, not client-go's 5/s: at that rate a node
// given a few pods a second queued their token requests and status writes.
func TestNodeClientsRateAsRealKubelets(t *testing.T) {
	c, err := kubernetes.NewForConfig(nodeConfig(&rest.Config{Host: "https://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	if qps := c.CoreV1().RESTClient().GetRateLimiter().QPS(); qps != kubelet.DefaultAPIQPS {
		t.Errorf("hollow kubelet client QPS %v, want %v as a real kubelet's", qps, kubelet.DefaultAPIQPS)
	}
	cfg := nodeConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 9})
	if cfg.QPS != 7 || cfg.Burst != 9 {
		t.Errorf("a configured rate was replaced: QPS %v burst %d, want 7 and 9", cfg.QPS, cfg.Burst)
	}
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/testing/freeport"
)

// failingOnce is a Writer whose first write fails.
type failingOnce struct {
	recorder
	once sync.Once
}

func (f *failingOnce) Apply(rs *Ruleset) error {
	var err error
	f.once.Do(func() { err = errors.New("netlink: no buffer space available") })
	if err != nil {
		return err
	}
	return f.recorder.Apply(rs)
}

// TestMetricsEndpoint reads the metrics port as Prometheus scrapes it: after the proxy
// wrote a service's rules (once after a failed write), the sync histograms have
// samples, the failure and the changes are counted, the slice's change is in the
// network programming latency, and /proxyMode names the mode.
func TestMetricsEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	client := fake.NewClientset(node, labService("web", "10.96.0.10", v1.ServiceTypeClusterIP))
	w := &failingOnce{}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Client: client, NodeName: "node-a", MinSyncPeriod: 10 * time.Millisecond, Writer: w,
			Conntrack: &clearedConntrack{cleared: map[netip.AddrPort]bool{}}, MetricsBindAddress: metricsAddr, HealthzBindAddress: healthAddr})
	}()
	waitRules(t, &w.recorder, "the service", func(s string) bool { return strings.Contains(s, "10.96.0.10 . tcp . 80") })
	slice := labSlice("web", labEP1)
	// The trigger time is what the EndpointSlice controller stamps: when the change
	// (a pod becoming ready, say) happened.
	slice.Annotations = map[string]string{triggerTimeAnnotation: time.Now().Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("lab").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules(t, &w.recorder, "the endpoint", func(s string) bool { return strings.Contains(s, "dnat to "+labEP1.String()) })

	if code, body := get(t, "http://"+healthAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on the health port: %d %s", code, body)
	}
	// The endpoint's sync is counted as it ends, just after the rules are written.
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var code int
		if code, body = get(t, "http://"+metricsAddr+"/metrics"); code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		if n, _, _ := sample(body, "kubeproxy_network_programming_duration_seconds_count"); n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []struct {
		name string
		min  float64
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds_count", 3}, // the failed write, the service, the endpoint
		{"kubeproxy_sync_full_proxy_rules_duration_seconds_count", 3},
		{"kubeproxy_network_programming_duration_seconds_count", 1},
		{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", 1},
		{"kubeproxy_sync_proxy_rules_service_changes_total", 1},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", 1},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", 1},
		{"kubeproxy_proxy_healthz_total", 1},
	} {
		got, _, ok := sample(body, want.name)
		if !ok || got < want.min {
			t.Errorf("%s: %v (found %t), want at least %v", want.name, got, ok, want.min)
		}
	}
	if n, labels, _ := sample(body, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"); n != 1 || labels != `ip_family="IPv4"` {
		t.Errorf("nftables sync failures: %v {%s}, want 1 {ip_family=\"IPv4\"}", n, labels)
	}
	if !strings.Contains(body, "# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram") {
		t.Error("the sync duration is not a histogram")
	}
	if _, _, ok := sample(body, "process_start_time_seconds"); !ok {
		t.Error("no process metrics")
	}

	for path, want := range map[string]string{"/proxyMode": "nftables", "/healthz": "ok", "/livez": "ok"} {
		if code, body := get(t, "http://"+metricsAddr+path); code != http.StatusOK || body != want {
			t.Errorf("%s: %d %q, want 200 %q", path, code, body, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestMetricsAddress(t *testing.T) {
	for flag, want := range map[string]string{"": "", "0": "", "127.0.0.1:0": "", "127.0.0.1:10249": "127.0.0.1:10249", "0.0.0.0:10249": "0.0.0.0:10249"} {
		if got := metricsAddress(flag); got != want {
			t.Errorf("metricsAddress(%q) = %q, want %q", flag, got, want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sample is the first sample of a scraped metric whose line starts with name followed
// by its labels or a space: its value and its labels as written.
func sample(body, name string) (value float64, labels string, ok bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, found := strings.CutPrefix(line, name)
		if !found || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			labels, rest = rest[1:end], rest[end+1:]
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[0], 64)
		return v, labels, err == nil
	}
	return 0, "", false
}

package controllermanager

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"mizzen/internal/controller/util"
	"mizzen/internal/controllermanager/metrics"
	"mizzen/internal/testing/freeport"
)

// servedOnce notes that TestHealthzAndMetrics ran in this process: client-go keeps the
// first work queue metrics provider a process sets, so a second run (-count) would see
// its queues report to the first run's registry.
var servedOnce atomic.Bool

// The only test in this package that serves, for the reason above.
func TestHealthzAndMetrics(t *testing.T) {
	if servedOnce.Swap(true) {
		t.Skip("client-go took the first run's work queue metrics provider for the whole process")
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	descs := []Descriptor{{Name: "probe", Start: func(ctx context.Context, cc *ControllerContext) error {
		q := util.NewQueue("probe")
		q.Add("default/one")
		q.Add("default/two")
		go func() { <-ctx.Done(); q.ShutDown() }()
		return nil
	}}}
	opts := RunOptions{
		LeaderElect: true, Identity: "serving", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		Serving: &ServingOptions{BindAddress: "127.0.0.1", Listening: func(a net.Addr) { addrs <- a }},
	}
	// The fake apiserver allows every SubjectAccessReview, so anyone may read /metrics
	// here (the delegated authorization itself is tested in internal/componentserve).
	fakeClient := fake.NewClientset()
	fakeClient.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = true
		return true, sar, nil
	})
	done := make(chan error, 1)
	go func() { done <- run(ctx, fakeClient, nil, descs, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	var base string
	select {
	case a := <-addrs:
		base = "https://" + a.String()
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}
	// The certificate is self-signed, as upstream's default.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	want := []string{
		`workqueue_adds_total{name="probe"} 2`,
		`workqueue_depth{name="probe"} 2`,
		`leader_election_master_status{name="kube-controller-manager"} 1`,
		`# TYPE workqueue_queue_duration_seconds histogram`,
		`process_resident_memory_bytes`,
	}
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get("/metrics")
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("/metrics lacks %q", w)
			}
		}
	}
}

// TestServeFreesItsPortOnStop: the server bundle runs the controller-manager again
// after it loses its Lease, and that run listens on the same port; the port must be
// free when the first run returns (it was shut down later, on the context's end, so
// the second run could fail with "address already in use" and take the server down).
func TestServeFreesItsPortOnStop(t *testing.T) {
	port := freeport.Get(t)
	opts := ServingOptions{BindAddress: "127.0.0.1", Port: port}
	for round := range 3 {
		stop, err := serve(context.Background(), opts, fake.NewClientset(), metrics.New(), nil)
		if err != nil {
			t.Fatalf("run %d: %v", round+1, err)
		}
		stop()
	}
}

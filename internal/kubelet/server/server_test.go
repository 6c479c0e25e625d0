package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/cri/fake"
	"mizzen/internal/pki"
)

// testNode is a node server on the fake runtime with one pod, default/web, whose
// container app has written a log, and the clients of several identities.
type testNode struct {
	url     string
	clients map[string]*http.Client
}

func startTestNode(t *testing.T) *testNode {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"), "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.IssueServing("node-a", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	servingPair, err := serving.TLS()
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	rt := fake.New(fake.Options{})
	cri := rt.Client()
	logDir := filepath.Join(dir, "pods", "default_web_uid1")
	if _, err := cri.PullImage(ctx, &runtimeapi.ImageSpec{Image: "app:1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid1"},
		LogDirectory: logDir,
		Labels:       map[string]string{labelPodName: "web", labelPodNamespace: "default", labelPodUID: "uid1"},
	}
	sb, err := cri.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	// The app container ran once (attempt 0, now exited) and runs again (attempt 1).
	logs := map[uint32]string{
		0: "2026-01-02T03:03:00Z stdout F before the restart\n",
		1: "2026-01-02T03:04:01Z stdout F hello\n2026-01-02T03:04:02Z stderr F world\n",
	}
	if err := os.MkdirAll(filepath.Join(logDir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	for attempt := uint32(0); attempt <= 1; attempt++ {
		logPath := filepath.Join("app", strconv.Itoa(int(attempt))+".log")
		id, err := cri.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: attempt}, Image: &runtimeapi.ImageSpec{Image: "app:1"},
			LogPath: logPath,
			Labels:  map[string]string{labelPodName: "web", labelPodNamespace: "default", labelPodUID: "uid1", labelContainerName: "app"},
		}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := cri.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if attempt == 0 {
			if err := cri.StopContainer(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(logDir, logPath), []byte(logs[attempt]), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid1"}}
	volDir := filepath.Join(dir, "volume-data")
	if err := os.MkdirAll(volDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volDir, "f"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{
		NodeName: "node-a", Runtime: cri, Client: fakeAPIServer(), Pods: func() []*v1.Pod { return []*v1.Pod{pod} },
		Certificate: servingPair, ClientCAs: ca.Pool(), RootDir: dir,
		PodCgroup: func(p *v1.Pod) string { return "/kubepods/besteffort/pod" + string(p.UID) },
		PodVolumes: func(uid string) []PodVolume {
			if uid != "uid1" {
				return nil
			}
			return []PodVolume{{Name: "data", Path: volDir, ClaimName: "data-web"}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = srv.TLSConfig()
	hs.StartTLS()
	t.Cleanup(hs.Close)

	// A CA the node does not trust signs the impostor's certificate.
	otherCA, err := pki.LoadOrCreateCA(filepath.Join(dir, "other"), "ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	client := func(signer *pki.CA, user string, groups []string) *http.Client {
		cfg := &tls.Config{RootCAs: ca.Pool()}
		if signer != nil {
			issued, err := signer.IssueClient(user, groups)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := issued.TLS()
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	return &testNode{url: hs.URL, clients: map[string]*http.Client{
		"anonymous":        client(nil, "", nil),
		"apiserver":        client(ca, APIServerClientUser, nil),
		"admin":            client(ca, "alice", []string{"system:masters"}),
		"node":             client(ca, "system:node:node-b", []string{"system:nodes"}),
		"impostor":         client(otherCA, APIServerClientUser, nil),
		"metrics":          client(ca, MetricsServerUser, nil),
		"proxier":          client(ca, "proxier", nil),
		"monitoring-token": {Transport: &bearer{token: "monitoring", next: client(nil, "", nil).Transport}},
		"bad-token":        {Transport: &bearer{token: "bad", next: client(nil, "", nil).Transport}},
	}}
}

// bearer adds a bearer token to requests.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// fakeAPIServer answers the node server's reviews as the apiserver would with a
// cluster's RBAC: the token "monitoring" is the account monitoring/prometheus, which
// may get nodes/metrics; the apiserver's kubelet client may do anything to nodes, the
// metrics server get nodes/stats and nodes/metrics, and "proxier" what
// nodes/proxy grants (not stats or metrics); each only on the node named node-a.
func fakeAPIServer() *k8sfake.Clientset {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "monitoring" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"}}}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a := sar.Spec.ResourceAttributes
		if a == nil || a.Resource != "nodes" || a.Name != "node-a" || a.Group != "" {
			return true, sar, nil
		}
		switch sar.Spec.User {
		case APIServerClientUser:
			sar.Status.Allowed = true
		case MetricsServerUser:
			sar.Status.Allowed = a.Verb == "get" && (a.Subresource == "stats" || a.Subresource == "metrics")
		case "system:serviceaccount:monitoring:prometheus":
			sar.Status.Allowed = a.Verb == "get" && a.Subresource == "metrics"
		case "proxier":
			sar.Status.Allowed = a.Subresource == "proxy"
		}
		return true, sar, nil
	})
	return client
}

func (n *testNode) get(t *testing.T, who, path string) (int, string, error) {
	t.Helper()
	resp, err := n.clients[who].Get(n.url + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func TestAuthentication(t *testing.T) {
	n := startTestNode(t)
	for _, tc := range []struct {
		who, path string
		want      int
		wantBody  string
	}{
		{"anonymous", "/healthz", http.StatusUnauthorized, "Unauthorized"},
		{"anonymous", "/containerLogs/default/web/app", http.StatusUnauthorized, "Unauthorized"},
		{"node", "/containerLogs/default/web/app", http.StatusForbidden, "Forbidden (user=system:node:node-b, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{"node", "/stats/summary", http.StatusForbidden, "subresource(s)=[stats]"},
		{"node", "/pods", http.StatusForbidden, "subresource(s)=[pods proxy]"},
		{"node", "/exec/default/web/app?command=ls&stdout=true", http.StatusForbidden, "verb=get, resource=nodes, subresource(s)=[proxy]"},
		{"metrics", "/stats/summary", http.StatusOK, `"node"`},
		{"metrics", "/metrics/resource", http.StatusOK, "container_cpu_usage_seconds_total"},
		{"metrics", "/metrics", http.StatusOK, "kubelet_running_pods"},
		{"node", "/metrics", http.StatusForbidden, "subresource(s)=[metrics]"},
		{"metrics", "/metrics/cadvisor", http.StatusOK, "container_cpu_usage_seconds_total"},
		{"apiserver", "/metrics/cadvisor", http.StatusOK, "container_cpu_usage_seconds_total"},
		{"node", "/metrics/cadvisor", http.StatusForbidden, "Forbidden (user=system:node:node-b, verb=get, resource=nodes, subresource(s)=[metrics])"},
		{"anonymous", "/metrics/cadvisor", http.StatusUnauthorized, "Unauthorized"},
		{"metrics", "/containerLogs/default/web/app", http.StatusForbidden, "Forbidden (user=system:metrics-server, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{"metrics", "/pods", http.StatusForbidden, "subresource(s)=[pods proxy]"},
		{"metrics", "/exec/default/web/app?command=ls&stdout=true", http.StatusForbidden, "subresource(s)=[proxy]"},
		{"proxier", "/metrics", http.StatusForbidden, "Forbidden (user=proxier, verb=get, resource=nodes, subresource(s)=[metrics])"},
		{"proxier", "/stats/summary", http.StatusForbidden, "subresource(s)=[stats]"},
		{"proxier", "/pods", http.StatusOK, "PodList"},
		{"proxier", "/healthz", http.StatusOK, "ok"},
		{"proxier", "/containerLogs/default/web/app", http.StatusOK, "hello"},
		{"monitoring-token", "/metrics", http.StatusOK, "kubelet_running_pods"},
		{"monitoring-token", "/pods", http.StatusForbidden, "Forbidden (user=system:serviceaccount:monitoring:prometheus, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{"bad-token", "/metrics", http.StatusUnauthorized, "Unauthorized"},
		{"apiserver", "/healthz", http.StatusOK, "ok"},
		{"admin", "/healthz", http.StatusOK, "ok"},
		{"apiserver", "/no/such/path", http.StatusNotFound, ""},
	} {
		code, body, err := n.get(t, tc.who, tc.path)
		if err != nil {
			t.Errorf("%s %s: %v", tc.who, tc.path, err)
			continue
		}
		if code != tc.want || !strings.Contains(body, tc.wantBody) {
			t.Errorf("%s %s: %d %q, want %d containing %q", tc.who, tc.path, code, body, tc.want, tc.wantBody)
		}
	}
	// A certificate from another CA is not accepted: the client either withholds it
	// (it does not chain to the CAs the server names) or fails the handshake.
	if code, body, err := n.get(t, "impostor", "/healthz"); err == nil && code != http.StatusUnauthorized {
		t.Errorf("a certificate of an untrusted CA: %d %q", code, body)
	}
}

func TestEndpoints(t *testing.T) {
	n := startTestNode(t)
	for _, tc := range []struct {
		path     string
		want     int
		wantBody string
	}{
		{"/containerLogs/default/web/app", http.StatusOK, "hello\nworld\n"},
		{"/containerLogs/default/web/app?tailLines=1&timestamps=true", http.StatusOK, "2026-01-02T03:04:02Z world\n"},
		{"/containerLogs/default/web/app?limitBytes=3", http.StatusOK, "hel"},
		{"/containerLogs/default/web/app?tailLines=-2", http.StatusBadRequest, "tailLines: Invalid value"},
		{"/containerLogs/default/web/nope", http.StatusBadRequest, `container \"nope\" in pod \"web\" is not available`},
		{"/containerLogs/default/web/app?previous=true", http.StatusOK, "before the restart\n"},
		{"/exec/default/web/app?stdout=true", http.StatusBadRequest, "you must specify at least one command"},
		{"/exec/default/web/app?command=ls", http.StatusBadRequest, "at least 1 of stdin, stdout, stderr"},
		{"/exec/default/web/nope?command=ls&stdout=true", http.StatusBadRequest, "container nope is not running in pod web"},
		{"/portForward/default/missing", http.StatusNotFound, `pods \"missing\" not found`},
	} {
		code, body, err := n.get(t, "apiserver", tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if code != tc.want || !strings.Contains(body, tc.wantBody) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.path, code, body, tc.want, tc.wantBody)
		}
	}

	code, body, err := n.get(t, "apiserver", "/pods")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/pods: %d %v", code, err)
	}
	var pods v1.PodList
	if err := json.Unmarshal([]byte(body), &pods); err != nil || pods.Kind != "PodList" || len(pods.Items) != 1 || pods.Items[0].Name != "web" {
		t.Errorf("/pods: %v %s", err, body)
	}

	code, body, err = n.get(t, "apiserver", "/runningpods/")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/runningpods/: %d %v", code, err)
	}
	pods = v1.PodList{}
	if err := json.Unmarshal([]byte(body), &pods); err != nil || len(pods.Items) != 1 || len(pods.Items[0].Spec.Containers) != 1 || pods.Items[0].Spec.Containers[0].Name != "app" {
		t.Errorf("/runningpods/: %v %s", err, body)
	}

	code, body, err = n.get(t, "apiserver", "/stats/summary")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/stats/summary: %d %v", code, err)
	}
	var sum Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil || sum.Node.NodeName != "node-a" || len(sum.Pods) != 1 ||
		sum.Pods[0].PodRef != (PodReference{Name: "web", Namespace: "default", UID: "uid1"}) || len(sum.Pods[0].Containers) != 1 ||
		sum.Node.Fs == nil || sum.Node.Fs.CapacityBytes == nil || *sum.Node.Fs.CapacityBytes == 0 || sum.Node.Memory == nil || sum.Node.CPU == nil {
		t.Errorf("/stats/summary: %v %s", err, body)
	}
	if vols := sum.Pods[0].Volumes; len(vols) != 1 || vols[0].Name != "data" || vols[0].PVCRef == nil || *vols[0].PVCRef != (PVCReference{Name: "data-web", Namespace: "default"}) ||
		vols[0].UsedBytes == nil || *vols[0].UsedBytes < 8192 || vols[0].InodesUsed == nil || *vols[0].InodesUsed != 2 || vols[0].CapacityBytes == nil {
		t.Errorf("/stats/summary volumes: %s", body)
	}
	if !strings.Contains(body, `"volume":[{"time":`) || !strings.Contains(body, `"pvcRef":{"name":"data-web","namespace":"default"}`) {
		t.Errorf("/stats/summary volume JSON is not upstream's shape: %s", body)
	}

	code, body, err = n.get(t, "apiserver", "/metrics/resource")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `container_start_time_seconds{container="app",namespace="default",pod="web"}`) ||
		!strings.Contains(body, "resource_scrape_error 0") {
		t.Errorf("/metrics/resource: %d %v\n%s", code, err, body)
	}

	// /metrics: the kubelet's own metrics, as the conformance suite's debug dump reads them
	// through nodes/NAME:10250/proxy/metrics.
	code, body, err = n.get(t, "apiserver", "/metrics")
	for _, want := range []string{`kubelet_node_name{node="node-a"} 1`, "kubelet_running_pods 1", `kubelet_running_containers{container_state="running"} 1`, "go_goroutines", "process_start_time_seconds"} {
		if err != nil || code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d %v, want %q in\n%s", code, err, want, body)
		}
	}
}

// TestCadvisorMetrics reads /metrics/cadvisor as Prometheus' kubernetes-cadvisor job
// does: the running container's series under cAdvisor's names and labels, its pod's
// cgroup with container="", and the machine's.
func TestCadvisorMetrics(t *testing.T) {
	n := startTestNode(t)
	code, body, err := n.get(t, "apiserver", "/metrics/cadvisor")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics/cadvisor: %d %v\n%s", code, err, body)
	}
	// The running attempt's runtime ID names its series and its cgroup.
	m := regexp.MustCompile(`container_cpu_usage_seconds_total\{container="app",cpu="total",id="/kubepods/besteffort/poduid1/([0-9a-z]+)",image="app:1",name="([0-9a-z]+)",namespace="default",pod="web"\} \S+ \d+\n`).FindStringSubmatch(body)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no container_cpu_usage_seconds_total series for default/web's app, named by its ID and cgroup:\n%s", body)
	}
	ctr := fmt.Sprintf(`{container="app",id="/kubepods/besteffort/poduid1/%s",image="app:1",name="%s",namespace="default",pod="web"}`, m[1], m[1])
	pod := `{container="",id="/kubepods/besteffort/poduid1",image="",name="",namespace="default",pod="web"}`
	for _, want := range []string{
		"# TYPE container_cpu_usage_seconds_total counter",
		"container_memory_working_set_bytes" + ctr,
		"container_memory_usage_bytes" + ctr,
		"container_memory_rss" + ctr,
		"container_start_time_seconds" + ctr,
		"container_last_seen" + ctr,
		`container_cpu_usage_seconds_total{container="",cpu="total",id="/kubepods/besteffort/poduid1",image="",name="",namespace="default",pod="web"}`,
		"container_memory_working_set_bytes" + pod,
		"container_start_time_seconds" + pod,
		`container_network_receive_bytes_total{container="",id="/kubepods/besteffort/poduid1",image="",interface="eth0",name="",namespace="default",pod="web"}`,
		`container_cpu_usage_seconds_total{container="",cpu="total",id="/",image="",name="",namespace="",pod=""}`,
		"# TYPE machine_cpu_cores gauge",
		"machine_memory_bytes{",
		"container_scrape_error 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/cadvisor lacks %s", want)
		}
	}
	// The exited attempt has no series.
	if strings.Count(body, "container_start_time_seconds{container=\"app\"") != 1 {
		t.Errorf("want one series for app, the running attempt's:\n%s", body)
	}
}

package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"mizzen/internal/cri/fake"
	"mizzen/internal/hostaddr"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/metrics"
	"mizzen/internal/pki"
	testapiserver "mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/kubectlrun"
	testnodeserver "mizzen/internal/testing/nodeserver"
)

// hostIP is a routable address of this machine: EndpointSlices refuse loopback ones.
func hostIP(t *testing.T) net.IP {
	t.Helper()
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skipf("no routable IPv4 address: %v", err)
	}
	return ip
}

// startNodeServer runs a kubelet node server over a fake runtime that runs the pod
// default/web (one container, "app", at 10 millicores).
func startNodeServer(t *testing.T, ctx context.Context, cp *testapiserver.Server, ip net.IP) int {
	t.Helper()
	rt := fake.New(fake.Options{}).Client()
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "app:1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	podLabels := map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "uid-web"}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"}, Labels: podLabels}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "app:1"}, Labels: podLabels,
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return testnodeserver.Start(t, ctx, cp, ip, nodeserver.Options{NodeName: "node-a", Runtime: rt, Pods: func() []*corev1.Pod { return nil }})
}

// createNodeAndPod writes the node (its kubelet at ip:port) and the pod it runs.
func createNodeAndPod(t *testing.T, ctx context.Context, client kubernetes.Interface, ip net.IP, port int) {
	t.Helper()
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"zone": "a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	node.Status.Allocatable = node.Status.Capacity
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// availability is the APIService's Available condition.
func availability(ctx context.Context, dyn dynamic.Interface) (status, reason, message string, err error) {
	obj, err := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).Get(ctx, metrics.APIServiceName, metav1.GetOptions{})
	if err != nil {
		return "", "", "", err
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg, nil
		}
	}
	return "", "", "", nil
}

func TestMetricsThroughTheAggregator(t *testing.T) {
	ip := hostIP(t)
	cp := testapiserver.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := cp.AdminConfig
	client := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)

	kubeletPort := startNodeServer(t, ctx, cp, ip)
	createNodeAndPod(t, ctx, client, ip, kubeletPort)

	// The metrics server's own identity: kubelets let it read stats.
	metricsCfg, err := cp.ComponentConfig("metrics-server", nodeserver.MetricsServerUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	servingCA, err := pki.LoadOrCreateCA(certDir, "metrics-server-ca", "metrics-server-ca")
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	serverCtx, stopServer := context.WithCancel(ctx)
	serverDone := make(chan struct{})
	var serverErr error
	go func() {
		defer close(serverDone)
		serverErr = metrics.Run(serverCtx, metrics.Options{
			Config: metricsCfg, Listener: listener, CertDir: certDir, Resolution: time.Second,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	}()
	t.Cleanup(func() {
		stopServer()
		<-serverDone
	})
	if _, err := metrics.Register(ctx, admin, metrics.Registration{Address: ip.String(), Port: int32(port), CABundle: servingCA.CertPEM}, nil); err != nil {
		t.Fatal(err)
	}

	// Through the apiserver, as kubectl top reads it: protobuf.
	topCfg := rest.CopyConfig(admin)
	topCfg.ContentType = "application/vnd.kubernetes.protobuf"
	mc := metricsclient.NewForConfigOrDie(topCfg)
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		if len(list.Items) != 1 || list.Items[0].Name != "node-a" {
			lastErr = errors.New("node-a not listed yet")
			return false, nil
		}
		n := list.Items[0]
		if n.Usage.Memory().IsZero() || n.Window.Duration <= 0 || n.Labels["zone"] != "a" {
			t.Fatalf("node-a metrics: %+v", n)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("GET /apis/metrics.k8s.io/v1beta1/nodes through the apiserver: %v (last: %v)", err, lastErr)
	}
	status, reason, _, err := availability(ctx, dyn)
	if err != nil || status != "True" || reason != "Passed" {
		t.Errorf("APIService Available=%s reason %s (%v), want True Passed", status, reason, err)
	}

	// Pods: the fake runtime's container uses 10 millicores.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pm, err := mc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pm.Items) != 1 {
			lastErr = err
			return false, nil
		}
		c := pm.Items[0].Containers
		if len(c) != 1 || c[0].Name != "app" || c[0].Usage.Cpu().MilliValue() < 9 || c[0].Usage.Cpu().MilliValue() > 11 || c[0].Usage.Memory().IsZero() {
			t.Fatalf("web's metrics: %+v", pm.Items[0])
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod metrics: %v (last: %v)", err, lastErr)
	}
	if pm, err := mc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{LabelSelector: "app=other"}); err != nil || len(pm.Items) != 0 {
		t.Errorf("a selector matching nothing: %v, %v", pm, err)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a pod without metrics: %v, want NotFound", err)
	}

	// kubectl top, in this process.
	t.Setenv("KUBECACHEDIR", t.TempDir())
	rows := kubectlRows(t, cp.AdminKubeconfig, "top", "node")
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"}) || rows[1][0] != "node-a" {
		t.Errorf("kubectl top node:\n%v", rows)
	}
	rows = kubectlRows(t, cp.AdminKubeconfig, "top", "pod", "-n", "default")
	// About 10m: the rate is measured between two real-time samples.
	if len(rows) != 2 || len(rows[1]) != 3 || rows[1][0] != "web" || !slices.Contains([]string{"9m", "10m", "11m"}, rows[1][1]) {
		t.Errorf("kubectl top pod:\n%v", rows)
	}

	// Discovery, legacy and aggregated, lists the group and its resources.
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "metrics.k8s.io" }) {
		t.Errorf("discovery groups lack metrics.k8s.io: %+v", groups.Groups)
	}
	resources, err := client.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range resources.APIResources {
		names = append(names, r.Name+"="+r.Kind)
	}
	if !slices.Equal(names, []string{"nodes=NodeMetrics", "pods=PodMetrics"}) {
		t.Errorf("metrics.k8s.io/v1beta1 resources: %v", names)
	}
	_, all, err := client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, list := range all {
		if list.GroupVersion == "metrics.k8s.io/v1beta1" && len(list.APIResources) == 2 {
			found = true
		}
	}
	if !found {
		t.Error("aggregated discovery lacks metrics.k8s.io/v1beta1 with its two resources")
	}

	// A forged front-proxy header from a client is not believed: the apiserver
	// replaces it with the caller's own name.
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes/node-a").
		SetHeader("X-Remote-User", "someone-else").DoRaw(ctx)
	if err != nil {
		t.Errorf("GET with a forged X-Remote-User: %v %s", err, raw)
	}

	// The backend goes away: the APIService turns unavailable and requests get 503.
	stopServer()
	<-serverDone
	if serverErr != nil {
		t.Errorf("the metrics server stopped with %v", serverErr)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		status, reason, _, err = availability(ctx, dyn)
		return err == nil && status == "False", nil
	})
	if err != nil || reason != "FailedDiscoveryCheck" {
		t.Fatalf("APIService Available=%s reason %s after the backend stopped (%v), want False FailedDiscoveryCheck", status, reason, err)
	}
	_, err = mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("listing node metrics with the backend down: %v, want 503", err)
	}

	// Without endpoints, the reason says so.
	if err := client.DiscoveryV1().EndpointSlices(metrics.ServiceNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + metrics.ServiceName}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		status, reason, _, err = availability(ctx, dyn)
		return err == nil && reason == "EndpointsNotFound", nil
	})
	if err != nil || status != "False" {
		t.Errorf("APIService Available=%s reason %s without endpoint slices (%v), want False EndpointsNotFound", status, reason, err)
	}
}

// kubectlRows runs the upstream kubectl in this process and splits its output into
// rows of cells; the test fails if kubectl does.
func kubectlRows(t *testing.T, kubeconfig string, args ...string) [][]string {
	t.Helper()
	out := kubectlrun.MustRun(t, kubeconfig, args...)
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

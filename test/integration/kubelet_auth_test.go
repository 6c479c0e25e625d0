package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/cri/fake"
	"mizzen/internal/hostaddr"
	kubeletserver "mizzen/internal/kubelet/server"
	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/bearer"
	"mizzen/internal/testing/nodeserver"
)

// TestKubeletAuthorization reaches a kubelet's node server as its callers do: it
// authenticates them by client certificate or by a bearer token through a TokenReview,
// and authorizes each request by a SubjectAccessReview on nodes/<subresource>, so
// what a caller may do is what RBAC grants it.
func TestKubeletAuthorization(t *testing.T) {
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skipf("no routable IPv4 address (the apiserver does not proxy to loopback): %v", err)
	}
	cp := apiserver.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig)

	// The kubelet of node-a: its own node identity asks the apiserver about callers.
	port := nodeserver.Start(t, ctx, cp, ip, kubeletserver.Options{NodeName: "node-a", Runtime: fake.New(fake.Options{}).Client(),
		Pods: func() []*corev1.Pod { return nil }})
	kubeletURL := "https://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))

	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two ServiceAccounts: prometheus, whose ClusterRole grants get on nodes/metrics as
	// Prometheus' does, and nobody, granted nothing.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, name := range []string{"prometheus", "nobody"} {
		if _, err := admin.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tr.Status.Token
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes/metrics"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "prometheus"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	caPEM, err := os.ReadFile(cp.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	metricsCfg, err := cp.ComponentConfig("metrics-server", kubeletserver.MetricsServerUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	metricsCert, err := tls.X509KeyPair(metricsCfg.CertData, metricsCfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string, certs ...tls.Certificate) (int, string) {
		t.Helper()
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		return bearer.Get(t, hc, kubeletURL+path, token)
	}

	for _, tc := range []struct {
		name, path, token string
		certs             []tls.Certificate
		want              int
		wantBody          string
	}{
		{"anonymous", "/metrics", "", nil, 401, "Unauthorized"},
		{"a token the apiserver does not accept", "/metrics", "not-a-token", nil, 401, "Unauthorized"},
		{"a ServiceAccount without RBAC", "/metrics", tokens["nobody"], nil, 403,
			"Forbidden (user=system:serviceaccount:monitoring:nobody, verb=get, resource=nodes, subresource(s)=[metrics])"},
		{"a ServiceAccount granted nodes/metrics scrapes /metrics", "/metrics", tokens["prometheus"], nil, 200, "kubelet_running_pods"},
		{"... and /metrics/cadvisor", "/metrics/cadvisor", tokens["prometheus"], nil, 200, "machine_cpu_cores"},
		{"... but not the pods", "/pods", tokens["prometheus"], nil, 403,
			"Forbidden (user=system:serviceaccount:monitoring:prometheus, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{"... nor exec", "/exec/default/web/app?command=ls&stdout=true", tokens["prometheus"], nil, 403,
			"Forbidden (user=system:serviceaccount:monitoring:prometheus, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{"the metrics server reads the summary", "/stats/summary", "", []tls.Certificate{metricsCert}, 200, `"nodeName":"node-a"`},
		{"the metrics server reads resource metrics", "/metrics/resource", "", []tls.Certificate{metricsCert}, 200, "node_cpu_usage_seconds_total"},
		{"the metrics server cannot list pods", "/pods", "", []tls.Certificate{metricsCert}, 403,
			"Forbidden (user=system:metrics-server, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path, tc.token, tc.certs...)
			if code != tc.want || !strings.Contains(body, tc.wantBody) {
				t.Errorf("GET %s: %d %q, want %d containing %q", tc.path, code, body, tc.want, tc.wantBody)
			}
		})
	}

	// The apiserver reaches the kubelet with its kubelet-client identity, which RBAC
	// binds system:kubelet-api-admin: the nodes proxy gets through.
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/node-a/proxy/pods").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), `"kind":"PodList"`) {
		t.Errorf("nodes/node-a/proxy/pods through the apiserver: %v %s", err, raw)
	}
}

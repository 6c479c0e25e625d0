package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"mizzen/internal/pki"
	"mizzen/internal/testing/apiserver"
)

// Responses are read with Do().Get(), the one way client-go both returns the body and
// decodes a Status from an error (DoRaw and Raw do not).

// fakeKubelet records what the apiserver asks of a node and answers with the path it
// was asked for.
type fakeKubelet struct {
	mu       sync.Mutex
	requests []string // "user path?query"
}

func (f *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user := "anonymous"
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		user = r.TLS.VerifiedChains[0][0].Subject.CommonName
	}
	f.mu.Lock()
	f.requests = append(f.requests, user+" "+r.URL.RequestURI())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("from kubelet: " + r.URL.Path + "\n"))
}

func (f *fakeKubelet) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		return ""
	}
	return f.requests[len(f.requests)-1]
}

func TestKubeletSubresources(t *testing.T) {
	srv := apiserver.StartServer(t)
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()

	// The fake kubelet trusts the cluster CA for clients, as a real one is told to.
	caPEM, err := os.ReadFile(filepath.Join(srv.DataDir, "tls", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "kubelet-ca", "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.IssueServing("node-a", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := serving.TLS()
	if err != nil {
		t.Fatal(err)
	}
	kl := &fakeKubelet{}
	hs := httptest.NewUnstartedServer(kl)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	_, portStr, _ := net.SplitHostPort(hs.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	node, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "node-a.invalid"}, {Type: v1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "multi", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "node-a",
			InitContainers: []v1.Container{{Name: "setup", Image: "img"}},
			Containers:     []v1.Container{{Name: "a", Image: "img"}, {Name: "b", Image: "img"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "single", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "node-a",
			Containers: []v1.Container{{Name: "only", Image: "img"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "only", Image: "img"}}}},
	} {
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name, pod string
		opts      v1.PodLogOptions
		wantBody  string
		wantCall  string
		wantErr   string
	}{
		{name: "the only container by default", pod: "single",
			wantBody: "from kubelet: /containerLogs/default/single/only\n",
			wantCall: "kube-apiserver-kubelet-client /containerLogs/default/single/only"},
		{name: "options passed on", pod: "multi", opts: v1.PodLogOptions{Container: "b", Follow: true, TailLines: ptr.To[int64](3), Timestamps: true, LimitBytes: ptr.To[int64](100), Previous: true},
			wantBody: "from kubelet: /containerLogs/default/multi/b\n",
			wantCall: "kube-apiserver-kubelet-client /containerLogs/default/multi/b?follow=true&limitBytes=100&previous=true&tailLines=3&timestamps=true"},
		{name: "an init container", pod: "multi", opts: v1.PodLogOptions{Container: "setup"}, wantBody: "from kubelet: /containerLogs/default/multi/setup\n"},
		{name: "no container named in a pod of several", pod: "multi", wantErr: "a container name must be specified for pod multi, choose one of: [setup a b]"},
		{name: "a container the pod lacks", pod: "multi", opts: v1.PodLogOptions{Container: "x"}, wantErr: `container "x" in pod "multi" is not valid`},
		{name: "negative tail", pod: "single", opts: v1.PodLogOptions{TailLines: ptr.To[int64](-1)}, wantErr: "tailLines: Invalid value: -1"},
		{name: "both since options", pod: "single", opts: v1.PodLogOptions{SinceSeconds: ptr.To[int64](5), SinceTime: &metav1.Time{Time: time.Now()}}, wantErr: "at most one of `sinceTime` or `sinceSeconds`"},
		{name: "an unscheduled pod has no log yet", pod: "pending", wantBody: ""},
		{name: "a missing pod", pod: "nope", wantErr: `pods "nope" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := resultOf(client.CoreV1().Pods("default").GetLogs(tc.pod, &tc.opts).Do(ctx))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if tc.pod != "nope" && !apierrors.IsBadRequest(err) {
					t.Errorf("err %v is not a 400", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(body) != tc.wantBody {
				t.Errorf("body %q, want %q", body, tc.wantBody)
			}
			if tc.wantCall != "" && kl.last() != tc.wantCall {
				t.Errorf("kubelet saw %q, want %q", kl.last(), tc.wantCall)
			}
		})
	}

	t.Run("logs over a websocket", func(t *testing.T) {
		// As upstream's log handler: binary.k8s.io carries the log as binary messages,
		// base64.binary.k8s.io as base64 text (what the conformance spec reads).
		tlsCfg, err := rest.TLSConfigFor(srv.AdminConfig)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(srv.AdminConfig.Host)
		u.Scheme, u.Path, u.RawQuery = "wss", "/api/v1/namespaces/default/pods/single/log", "container=only"
		for protocol, want := range map[string]string{
			"binary.k8s.io":        "from kubelet: /containerLogs/default/single/only\n",
			"base64.binary.k8s.io": base64.StdEncoding.EncodeToString([]byte("from kubelet: /containerLogs/default/single/only\n")),
		} {
			dialer := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{protocol}}
			conn, resp, err := dialer.Dial(u.String(), nil)
			if err != nil {
				t.Fatalf("%s: %v (%v)", protocol, err, resp)
			}
			if conn.Subprotocol() != protocol {
				t.Errorf("subprotocol %q, want %q", conn.Subprotocol(), protocol)
			}
			var got strings.Builder
			for {
				_, msg, err := conn.ReadMessage()
				if err != nil {
					break
				}
				got.Write(msg)
			}
			conn.Close()
			if got.String() != want {
				t.Errorf("%s: read %q, want %q", protocol, got.String(), want)
			}
		}
	})

	t.Run("nodes proxy", func(t *testing.T) {
		body, err := resultOf(client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/node-a/proxy/stats/summary").Param("only_cpu_and_memory", "true").Do(ctx))
		if err != nil || string(body) != "from kubelet: /stats/summary\n" {
			t.Fatalf("%q %v", body, err)
		}
		if want := "kube-apiserver-kubelet-client /stats/summary?only_cpu_and_memory=true"; kl.last() != want {
			t.Errorf("kubelet saw %q, want %q", kl.last(), want)
		}
		_, err = resultOf(client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/missing/proxy/pods").Do(ctx))
		if !apierrors.IsNotFound(err) {
			t.Errorf("proxy to a missing node: %v", err)
		}
	})

	t.Run("streams need an upgrade", func(t *testing.T) {
		for _, sub := range []string{"exec", "attach", "portforward"} {
			req := client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("single").SubResource(sub)
			if sub == "exec" {
				req = req.Param("command", "true")
			}
			_, err := resultOf(req.Do(ctx))
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "Upgrade request required") {
				t.Errorf("%s without an upgrade: %v", sub, err)
			}
		}
		_, err := resultOf(client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("multi").SubResource("exec").
			Param("container", "x").Param("command", "true").Do(ctx))
		if err == nil || !strings.Contains(err.Error(), `container "x" in pod "multi" is not valid`) {
			t.Errorf("exec in a container the pod lacks: %v", err)
		}
		_, err = resultOf(client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("pending").SubResource("exec").
			Param("command", "true").Do(ctx))
		if err == nil || !strings.Contains(err.Error(), "pod pending does not have a host assigned") {
			t.Errorf("exec in an unscheduled pod: %v", err)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		list, err := client.Discovery().ServerResourcesForGroupVersion("v1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"pods/log": "Pod", "pods/exec": "PodExecOptions", "pods/attach": "PodAttachOptions",
			"pods/portforward": "PodPortForwardOptions", "nodes/proxy": "NodeProxyOptions"}
		for _, r := range list.APIResources {
			if kind, ok := want[r.Name]; ok {
				if r.Kind != kind {
					t.Errorf("%s: kind %s, want %s", r.Name, r.Kind, kind)
				}
				delete(want, r.Name)
			}
		}
		if len(want) > 0 {
			t.Errorf("discovery lacks %v", want)
		}
	})
}

// resultOf is a response's body and its error decoded from the Status.
func resultOf(r rest.Result) ([]byte, error) {
	body, _ := r.Raw()
	return body, r.Error()
}

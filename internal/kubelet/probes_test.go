package kubelet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/cri/fake"
)

// TestProbeHandlers runs each probe kind against real local endpoints.
func TestProbeHandlers(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			if r.Header.Get("X-Probe") != "yes" || r.URL.RawQuery != "full=1" {
				w.WriteHeader(http.StatusBadRequest)
			}
		case "/moved":
			http.Redirect(w, r, "/healthz?full=1", http.StatusFound)
		case "/moved-down":
			http.Redirect(w, r, "/down", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://0.0.0.0/", http.StatusFound)
		case "/headers":
			if r.Header.Get("User-Agent") != "kube-probe/1.37" || r.Header.Get("Accept") != "*/*" || r.Host != "example.test" {
				w.WriteHeader(http.StatusBadRequest)
			}
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		case "/custom-headers":
			if r.Header.Get("User-Agent") != "mine" || len(r.Header.Values("Accept")) != 0 {
				w.WriteHeader(http.StatusBadRequest)
			}
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer web.Close()
	u, _ := url.Parse(web.URL)
	webPort, _ := strconv.Atoi(u.Port())

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()
	grpcPort := int32(lis.Addr().(*net.TCPAddr).Port)

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(webPort)}}}
	get := func(path string, headers ...v1.HTTPHeader) v1.ProbeHandler {
		return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(webPort)), HTTPHeaders: headers}}
	}
	tests := []struct {
		name    string
		handler v1.ProbeHandler
		wantOK  bool
		wantErr string // the failure's message, when checked
		warning string
	}{
		{"http 200 with headers and query", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz?full=1", Port: intstr.FromString("http"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}, true, "", ""},
		{"http default headers, Host header", get("/headers", v1.HTTPHeader{Name: "Host", Value: "example.test"}), true, "", ""},
		{"http user's User-Agent, empty Accept not sent", get("/custom-headers",
			v1.HTTPHeader{Name: "user-agent", Value: "mine"}, v1.HTTPHeader{Name: "Accept", Value: ""}), true, "", ""},
		{"http same-host redirect followed", get("/moved", v1.HTTPHeader{Name: "X-Probe", Value: "yes"}), true, "", ""},
		{"http same-host redirect to a failure fails", get("/moved-down"), false, "HTTP probe failed with statuscode: 503", ""},
		{"http redirect loop fails", get("/loop"), false, "stopped after 10 redirects", ""},
		{"http other-host redirect is success with a warning", get("/away"), true, "",
			"Probe terminated redirects, Response body: <a href=\"http://0.0.0.0/\">Found</a>.\n\n"},
		{"http 503 fails", get("/down"), false, "HTTP probe failed with statuscode: 503", ""},
		{"http unknown named port fails", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromString("nope")}}, false, "", ""},
		{"tcp open port", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(webPort))}}, true, "", ""},
		{"tcp closed port", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort))}}, false, "", ""},
		{"grpc serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: grpcPort}}, true, "", ""},
		{"grpc service not serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: grpcPort, Service: ptrString("db")}}, false, "", ""},
	}
	kl := &Kubelet{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warning, err := kl.runProbe(context.Background(), &v1.Pod{}, c, &v1.Probe{ProbeHandler: tt.handler, TimeoutSeconds: 5}, "", []string{"127.0.0.1"})
			if (err == nil) != tt.wantOK {
				t.Errorf("probe error = %v, want success %v", err, tt.wantOK)
			}
			if err != nil && tt.wantErr != "" && !strings.HasSuffix(err.Error(), tt.wantErr) {
				t.Errorf("probe error = %q, want it to end with %q", err, tt.wantErr)
			}
			if warning != tt.warning {
				t.Errorf("warning = %q, want %q", warning, tt.warning)
			}
		})
	}

	t.Run("http timeout says so as upstream's", func(t *testing.T) {
		_, err := kl.runProbe(context.Background(), &v1.Pod{}, c, &v1.Probe{ProbeHandler: get("/slow"), TimeoutSeconds: 1}, "", []string{"127.0.0.1"})
		if want := "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"; err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("probe error = %v, want it to end with %q", err, want)
		}
	})

	rt := fake.New(fake.Options{})
	kl = &Kubelet{runtime: rt.Client()}
	sb, _ := rt.Client().RunPodSandbox(context.Background(), sandboxConfigFor("u"), "")
	_, _ = rt.Client().PullImage(context.Background(), imageSpec("busybox"), nil, nil)
	id, _ := rt.Client().CreateContainer(context.Background(), sb, containerConfigFor("app", "busybox"), nil)
	_ = rt.Client().StartContainer(context.Background(), id)
	exec := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}}
	if _, err := kl.runProbe(context.Background(), &v1.Pod{}, c, exec, id, nil); err != nil {
		t.Errorf("exec exiting 0 failed: %v", err)
	}
	rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1})
	if _, err := kl.runProbe(context.Background(), &v1.Pod{}, c, exec, id, nil); err == nil {
		t.Error("exec exiting 1 succeeded")
	}
}

func ptrString(s string) *string { return &s }

func sandboxConfigFor(uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: uid},
		Labels:   map[string]string{labelPodUID: uid},
	}
}

func imageSpec(image string) *runtimeapi.ImageSpec { return &runtimeapi.ImageSpec{Image: image} }

func containerConfigFor(name, image string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: imageSpec(image)}
}

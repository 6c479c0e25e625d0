package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// TestUI checks what the apiserver does for the web UI at /ui/: it serves the UI to
// whoever RBAC lets get /ui/* (everyone, by the bootstrap role mizzen:ui), denies
// framing, and gives the UI a transport that acts as the request's user and no one
// else; and it refuses a browser's writes and WebSocket handshakes sent from another
// site's page, which an ambient client certificate would otherwise authenticate.
func TestUI(t *testing.T) {
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		// A stand-in UI: what listing ConfigMaps through the transport answers.
		o.UI = func(w http.ResponseWriter, r *http.Request, asUser http.RoundTripper) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "https://in-process/api/v1/namespaces/default/configmaps", nil)
			resp, err := asUser.RoundTrip(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			resp.Body.Close()
			_, _ = io.WriteString(w, r.URL.Path+" "+strconv.Itoa(resp.StatusCode))
		}
	})
	ctx := context.Background()
	nobody, err := srv.ComponentConfig("ui-nobody", "ui-nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := rest.AnonymousClientConfig(srv.AdminConfig)
	get := func(cfg *rest.Config, path string, header http.Header) (int, http.Header, string) {
		t.Helper()
		// HTTP/1.1, which a WebSocket handshake needs.
		tlsCfg, err := rest.TLSConfigFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg.NextProtos = []string{"http/1.1"}
		rt := &http.Transport{TLSClientConfig: tlsCfg}
		defer rt.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := (&http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}

	t.Run("the UI acts as the request's user", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			cfg  *rest.Config
			want string
		}{
			{"cluster-admin's client certificate", srv.AdminConfig, "/ui/page 200"},
			{"a user without rights", nobody, "/ui/page 403"},
			{"nobody at all", anonymous, "/ui/page 403"},
		} {
			code, header, body := get(tt.cfg, "/ui/page", nil)
			if code != http.StatusOK || body != tt.want {
				t.Errorf("%s: %d %q, want 200 %q", tt.name, code, body, tt.want)
			}
			if header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s: X-Frame-Options %q, want DENY", tt.name, header.Get("X-Frame-Options"))
			}
		}
		if code, header, _ := get(srv.AdminConfig, "/ui", nil); code != http.StatusMovedPermanently || !strings.HasSuffix(header.Get("Location"), "/ui/") {
			t.Errorf("/ui: %d to %q, want 301 to /ui/", code, header.Get("Location"))
		}
	})

	t.Run("without the role, the UI is refused", func(t *testing.T) {
		admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
		if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, "mizzen:ui", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyCode(t, func() int { code, _, _ := get(nobody, "/ui/page", nil); return code }, http.StatusForbidden)
	})

	t.Run("a browser's write from another site's page is refused", func(t *testing.T) {
		cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME"}}`
		origin := "https://" + strings.TrimPrefix(srv.URL, "https://")
		for _, tt := range []struct {
			name        string
			header      map[string]string
			contentType string
			want        int
		}{
			{"another origin", map[string]string{"Origin": "https://evil.example"}, "application/json", http.StatusForbidden},
			{"an opaque origin", map[string]string{"Origin": "null"}, "application/json", http.StatusForbidden},
			{"marked cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "application/json", http.StatusForbidden},
			{"another port of the same site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://127.0.0.1:1"}, "application/json", http.StatusForbidden},
			{"a simple request's content type", nil, "text/plain", http.StatusUnsupportedMediaType},
			{"a form's content type", nil, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
			{"the server's own page", map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-origin"}, "application/json", http.StatusCreated},
			{"not a browser (kubectl)", nil, "application/json", http.StatusCreated},
		} {
			name := "cm-" + strings.ReplaceAll(strings.ReplaceAll(tt.name, " ", "-"), "'", "")
			name = strings.Trim(strings.ReplaceAll(strings.ReplaceAll(name, "(", ""), ")", ""), "-")
			rt, err := rest.TransportFor(srv.AdminConfig)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/default/configmaps", strings.NewReader(strings.Replace(cm, "NAME", name, 1)))
			req.Header.Set("Content-Type", tt.contentType)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := (&http.Client{Transport: rt}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s: %d %s, want %d", tt.name, resp.StatusCode, body, tt.want)
			}
			_, err = kubernetes.NewForConfigOrDie(srv.AdminConfig).CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
			if created := err == nil; created != (tt.want == http.StatusCreated) {
				t.Errorf("%s: ConfigMap created %v (%v), want %v", tt.name, created, err, tt.want == http.StatusCreated)
			} else if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("%s: %v", tt.name, err)
			}
		}
		// A WebSocket handshake (exec) from another origin is refused (browsers send no
		// Fetch Metadata with it: the Origin decides); the one Origin upstream's e2e
		// tests open theirs with goes on (the pod does not exist: 404).
		handshake := func(extra map[string]string) (int, string) {
			h := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"},
				"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
			for k, v := range extra {
				h.Set(k, v)
			}
			code, _, body := get(srv.AdminConfig, "/api/v1/namespaces/default/pods/p/exec?command=ls", h)
			return code, body
		}
		if code, body := handshake(map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden ||
			!strings.Contains(body, "WebSocket handshake from a page of https://evil.example") {
			t.Errorf("a cross-site WebSocket handshake: %d %s, want 403", code, body)
		}
		if code, body := handshake(map[string]string{"Origin": "http://localhost:8080"}); code != http.StatusForbidden {
			t.Errorf("a WebSocket handshake from a page of http://localhost:8080: %d %s, want 403", code, body)
		}
		if code, body := handshake(map[string]string{"Origin": "http://localhost"}); code != http.StatusNotFound {
			t.Errorf("a WebSocket handshake as upstream's e2e tests open it: %d %s, want the pod's 404", code, body)
		}
	})
}

// eventuallyCode waits, up to a bound, for answer to return want: the authorizer
// follows RBAC objects through a watch.
func eventuallyCode(t *testing.T, answer func() int, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := answer()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("answered %d, want %d", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/apiserver/componentstatus"
	"mizzen/internal/componentserve"
	"mizzen/internal/scheduler"
	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/bearer"
)

// TestSecureServing: the scheduler serves its own endpoints over HTTPS as upstream's
// on :10259, with the apiserver deciding who may read what. Health is open to anyone;
// /metrics is 403 for the anonymous and for a ServiceAccount without a role, 200 once
// RBAC grants get on /metrics (by token or by client certificate), and 401 for a
// token the apiserver does not know.
func TestSecureServing(t *testing.T) {
	srv := apiserver.StartServer(t)
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	// The scheduler's own credentials, as the bundle gives it: system:kube-scheduler
	// may create TokenReviews and SubjectAccessReviews and read the client CA.
	cfg, err := srv.ComponentConfig("scheduler", "system:kube-scheduler", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	leaderElect := true
	go func() {
		done <- scheduler.Run(ctx, scheduler.Options{RestConfig: cfg, LeaderElect: &leaderElect, MetricsAddr: "0", Identity: "secure",
			Serving: &componentserve.Options{BindAddress: "127.0.0.1", Listening: func(a net.Addr) { addrs <- a }},
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler.Run: %v", err)
		}
	})
	var base string
	select {
	case a := <-addrs:
		base = "https://" + a.String()
	case err := <-done:
		t.Fatalf("scheduler.Run returned before serving: %v", err)
	case <-time.After(timeout):
		t.Fatal("the scheduler did not serve")
	}

	insecure := &tls.Config{InsecureSkipVerify: true} // self-signed, as upstream's
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure}}
	get := func(client *http.Client, path, token string) (int, string) {
		t.Helper()
		return bearer.Get(t, client, base+path, token)
	}
	status := func(t *testing.T, body string) metav1.Status {
		t.Helper()
		var st metav1.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
			t.Fatalf("body %q is not a Status: %v", body, err)
		}
		return st
	}
	const metricName = "scheduler_pending_pods"

	t.Run("health is open to anyone", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			if code, body := get(anonymous, path, ""); code != http.StatusOK || body != "ok" {
				t.Errorf("%s = %d %q, want 200 ok", path, code, body)
			}
		}
	})
	t.Run("componentstatus probe sees it healthy", func(t *testing.T) {
		got := componentstatus.ProbeHealthz(context.Background(), base+"/healthz")
		if got.Status != corev1.ConditionTrue || got.Message != "ok" {
			t.Errorf("probe = %+v, want Healthy True ok", got)
		}
	})
	t.Run("anonymous metrics are forbidden", func(t *testing.T) {
		code, body := get(anonymous, "/metrics", "")
		st := status(t, body)
		want := `forbidden: User "system:anonymous" cannot get path "/metrics"`
		if code != http.StatusForbidden || st.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != want {
			t.Errorf("anonymous /metrics = %d %q, want 403 %q", code, body, want)
		}
	})
	t.Run("a bad token is unauthorized", func(t *testing.T) {
		code, body := get(anonymous, "/metrics", "not-a-token")
		st := status(t, body)
		if code != http.StatusUnauthorized || st.Reason != metav1.StatusReasonUnauthorized || st.Message != "Unauthorized" {
			t.Errorf("bad token /metrics = %d %q, want 401 Unauthorized", code, body)
		}
		// Health stays open even then? Upstream authenticates first: a bad token is 401
		// everywhere.
		if code, _ := get(anonymous, "/healthz", "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("bad token /healthz = %d, want 401", code)
		}
	})

	// A ServiceAccount's token, first without any role, then bound to one granting get
	// on /metrics.
	bg := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(bg, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	t.Run("a ServiceAccount without a role is forbidden", func(t *testing.T) {
		code, body := get(anonymous, "/metrics", token)
		want := `forbidden: User "system:serviceaccount:default:prometheus" cannot get path "/metrics"`
		if st := status(t, body); code != http.StatusForbidden || st.Message != want {
			t.Errorf("/metrics = %d %q, want 403 %q", code, body, want)
		}
	})
	if _, err := admin.RbacV1().ClusterRoles().Create(bg, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(bg, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("a ServiceAccount granted get on /metrics reads them", func(t *testing.T) {
		// The denial above is cached for up to 10 s, as upstream caches it.
		var code int
		var body string
		_ = wait.PollUntilContextTimeout(bg, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			code, body = get(anonymous, "/metrics", token)
			return code == http.StatusOK, nil
		})
		if code != http.StatusOK || !strings.Contains(body, metricName) {
			t.Errorf("/metrics = %d, body lacks %s:\n%.500s", code, metricName, body)
		}
		// Only /metrics was granted.
		if code, body := get(anonymous, "/debug/pprof/", token); code != http.StatusForbidden {
			t.Errorf("/debug/pprof/ = %d %q, want 403", code, body)
		}
	})
	t.Run("the admin's client certificate reads them", func(t *testing.T) {
		tc, err := rest.TLSConfigFor(srv.AdminConfig)
		if err != nil {
			t.Fatal(err)
		}
		tc.RootCAs, tc.InsecureSkipVerify = nil, true
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		if code, body := get(client, "/metrics", ""); code != http.StatusOK || !strings.Contains(body, metricName) {
			t.Errorf("/metrics with the admin's certificate = %d %.300q", code, body)
		}
	})
}

package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// getDebug GETs path as the client configured by cfg and returns the code and body.
func getDebug(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(strings.TrimSuffix(cfg.Host, "/") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// The API Priority and Fairness dumps are served under /debug/api_priority_and_fairness/
// to whom may get that non-resource path, as upstream's: system:masters, and a user
// once RBAC grants it; the request dump shows the very request reading it.
func TestPriorityAndFairnessDebugDumps(t *testing.T) {
	srv := apiserver.StartServer(t)
	admin := srv.AdminConfig
	const prefix = "/debug/api_priority_and_fairness/"

	code, body := getDebug(t, admin, prefix+"dump_priority_levels")
	if code != http.StatusOK || !strings.HasPrefix(body, "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests") {
		t.Fatalf("dump_priority_levels: %d\n%s", code, body)
	}
	for _, level := range []string{"catch-all", "exempt", "global-default", "leader-election", "node-high", "system", "workload-high", "workload-low"} {
		if !strings.Contains(body, "\n"+level+",") {
			t.Errorf("dump_priority_levels has no row for %s:\n%s", level, body)
		}
	}
	if code, body := getDebug(t, admin, prefix+"dump_queues"); code != http.StatusOK || !strings.HasPrefix(body, "PriorityLevelName, Index,") {
		t.Errorf("dump_queues: %d\n%s", code, body)
	}
	// The admin's own request is exempt, executing without a queue.
	code, body = getDebug(t, admin, prefix+"dump_requests?includeRequestDetails=1")
	if code != http.StatusOK || !strings.Contains(body, "UserName") || !rowMatches(body, "exempt", "exempt", "-1", "-1", "system:admin", "get", prefix+"dump_requests") {
		t.Errorf("dump_requests: %d, want the admin's exempt request in it:\n%s", code, body)
	}
	if code, _ := getDebug(t, admin, prefix+"dump_nothing"); code != http.StatusNotFound {
		t.Errorf("an unknown dump: %d, want 404", code)
	}

	userCfg, err := srv.ComponentConfig("user-debugger", "debugger", []string{"debuggers"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := getDebug(t, userCfg, prefix+"dump_requests"); code != http.StatusForbidden {
		t.Errorf("a user RBAC does not allow: %d, want 403", code)
	}
	client := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "apf-debugger"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{prefix + "*"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apf-debugger"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "apf-debugger"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "debuggers"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body = getDebug(t, userCfg, prefix+"dump_requests?includeRequestDetails=1")
		if code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its request falls to global-default and executes from a queue of it.
	if code != http.StatusOK || !rowMatches(body, "global-default", "global-default", "", "-1", "debugger", "get", prefix+"dump_requests") {
		t.Errorf("a user RBAC allows: %d, want 200 with its request in global-default:\n%s", code, body)
	}
}

// rowMatches: some line of the dump has these cells where given (an empty one: any)
// in columns 1-4, and the user, verb and path in the details' first three columns.
func rowMatches(dump, level, schema, queue, place, user, verb, path string) bool {
	for _, line := range strings.Split(dump, "\n") {
		cells := strings.Split(line, ",")
		if len(cells) != 18 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		want := []string{level, schema, queue, place}
		ok := true
		for i, w := range want {
			if w != "" && cells[i] != w {
				ok = false
			}
		}
		if ok && cells[10] == user && cells[11] == verb && cells[12] == path {
			return true
		}
	}
	return false
}

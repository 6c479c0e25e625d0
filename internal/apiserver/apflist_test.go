package apiserver_test

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// A list is admitted at the seats upstream's estimate gives it: five ConfigMaps of
// 90 kB make a list of ConfigMaps, served from the watch cache, hold about 450 kB,
// so 5 seats of global-default (which allows 8), as its flow's
// apiserver_flowcontrol_work_estimated_seats shows; a get takes one. A watch that
// starts with the objects is estimated as that list, one from a resourceVersion at
// one seat; each holds its seats only until it has sent its initial events, so an
// established watch is not among the requests the dump shows.
func TestPriorityAndFairnessListSeats(t *testing.T) {
	srv := apiserver.StartServer(t)
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()
	for i := range 5 {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-" + strconv.Itoa(i)}, Data: map[string]string{"pad": strings.Repeat("x", 90_000)}}
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerCfg, err := srv.ComponentConfig("user-reader", "reader", nil)
	if err != nil {
		t.Fatal(err)
	}
	reader := kubernetes.NewForConfigOrDie(readerCfg)

	seats := func() (sum, count float64) {
		t.Helper()
		_, body := getDebug(t, srv.AdminConfig, "/metrics")
		sc := bufio.NewScanner(strings.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			labels := `{flow_schema="global-default",priority_level="global-default"} `
			if v, ok := strings.CutPrefix(line, "apiserver_flowcontrol_work_estimated_seats_sum"+labels); ok {
				sum, _ = strconv.ParseFloat(v, 64)
			}
			if v, ok := strings.CutPrefix(line, "apiserver_flowcontrol_work_estimated_seats_count"+labels); ok {
				count, _ = strconv.ParseFloat(v, 64)
			}
		}
		return sum, count
	}
	// The authorizer follows the new binding shortly.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := reader.CoreV1().ConfigMaps("default").Get(ctx, "big-0", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader's get: %v", err)
		}
	}
	sum0, count0 := seats()
	if _, err := reader.CoreV1().ConfigMaps("default").Get(ctx, "big-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	sum1, count1 := seats()
	if sum1-sum0 != 1 || count1-count0 != 1 {
		t.Errorf("a get: estimated at %v seats over %v requests, want 1 over 1", sum1-sum0, count1-count0)
	}
	list, err := reader.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) < 5 {
		t.Fatalf("the list: %v", err)
	}
	sum2, count2 := seats()
	if sum2-sum1 != 5 || count2-count1 != 1 {
		t.Errorf("the list: estimated at %v seats over %v requests, want 5 over 1", sum2-sum1, count2-count1)
	}

	// A watch from no version sends the 5 objects first: estimated as the list.
	w, err := reader.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 5 {
		<-w.ResultChan()
	}
	sum3, count3 := seats()
	if sum3-sum2 != 5 || count3-count2 != 1 {
		t.Errorf("a watch from no version: estimated at %v seats over %v requests, want 5 over 1", sum3-sum2, count3-count2)
	}
	readersWatches := func() int {
		_, body := getDebug(t, srv.AdminConfig, "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1")
		n := 0
		for _, line := range strings.Split(body, "\n") {
			cells := strings.Split(line, ",")
			if len(cells) == 18 && strings.TrimSpace(cells[10]) == "reader" && strings.TrimSpace(cells[11]) == "watch" {
				n++
			}
		}
		return n
	}
	// Its initial events sent, the watch holds no seat.
	for deadline := time.Now().Add(10 * time.Second); readersWatches() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an established watch still holds its seats")
		}
	}
	w2, err := reader.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	sum4, count4 := seats()
	if sum4-sum3 != 1 || count4-count3 != 1 {
		t.Errorf("a watch from a version: estimated at %v seats over %v requests, want 1 over 1", sum4-sum3, count4-count3)
	}
	for deadline := time.Now().Add(10 * time.Second); readersWatches() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a watch from a version, with nothing to send, still holds its seat")
		}
	}
}

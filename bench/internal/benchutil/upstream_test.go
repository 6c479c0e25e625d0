package benchutil

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUpstream starts upstream's etcd, kube-apiserver and kube-scheduler from
// $UPSTREAM_BIN (skipped when unset), schedules a pod through them, and checks that
// Stop leaves no process and no directory behind.
func TestUpstream(t *testing.T) {
	bin := os.Getenv("UPSTREAM_BIN")
	if bin == "" {
		t.Skip("UPSTREAM_BIN is not set (a directory of upstream's binaries, as ../shared/upstream/build.sh makes)")
	}
	u, err := StartUpstream(bin, "10.77.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			u.Stop()
		}
	}()
	ctx := context.Background()
	// RBAC and managedFields are on: the admin is system:masters, and a create records
	// its manager.
	if _, err := u.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := u.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.ManagedFields) != 1 {
		t.Errorf("managedFields = %v, want one entry", pod.ManagedFields)
	}
	if err := u.StartScheduler(100); err != nil {
		t.Fatal(err)
	}
	pids := u.PIDs()
	if len(pids) != 3 {
		t.Fatalf("PIDs = %v, want apiserver, etcd and scheduler", pids)
	}
	u.Stop()
	stopped = true
	for _, pid := range pids {
		if !exited(pid) {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
	if _, err := os.Stat(u.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop: %v", u.Dir, err)
	}
}

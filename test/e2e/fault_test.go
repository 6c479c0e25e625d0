package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// convergeDeadline is how long the cluster gets, once the killed component is back and
// the workload has stopped, to show again what it was asked for.
const convergeDeadline = 30 * time.Second

// TestFaults kills each component with SIGKILL in the middle of a workload (Deployments
// scaled and rolled, pods deleted, Services changed, ConfigMaps written) and restarts
// it. Afterwards no acknowledged write is lost, no ReplicaSet ever ran more pods than
// its Deployment allows, no pod was bound twice, the EndpointSlices follow the Ready
// pods and the proxy's rules follow the slices, all within convergeDeadline.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of separate processes with containerd")
	}
	requireNodeRuntime(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("the nft tool is needed to read the proxy's rules (make deps)")
	}
	fc := startFaultCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newFaultRecord()
	rec.watchPods(ctx, fc.client)

	for _, d := range faultDeployments {
		rec.asked(d.name, d.minReplicas)
		if _, err := fc.client.AppsV1().Deployments(faultNS).Create(ctx, d.object(d.minReplicas), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: d.name},
			Spec: v1.ServiceSpec{Selector: map[string]string{"app": d.name}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := fc.client.CoreV1().Services(faultNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alt := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alt"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := fc.client.CoreV1().Services(faultNS).Create(ctx, alt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fc.converge(t, ctx, 2*time.Minute) // the first pods' images and sandboxes
	t.Logf("the proxy's rules:\n%s", fc.rulesSummary())

	restart := func(name string) func(*testing.T) {
		return func(t *testing.T) {
			fc.kill9(name)
			time.Sleep(2 * time.Second)
			fc.start(name)
		}
	}
	cases := []struct {
		name  string
		fault func(t *testing.T)
	}{
		{"apiserver", func(t *testing.T) {
			fc.kill9("apiserver")
			time.Sleep(2 * time.Second)
			fc.start("apiserver")
			waitReady(t, fc.dir.AdminKubeconfig())
		}},
		{"etcd-member", func(t *testing.T) {
			leader := etcdLeader(t, &fc.etcd)
			t.Logf("killing etcd member %d, the leader", leader)
			fc.killEtcdMember(leader)
			time.Sleep(3 * time.Second)
			fc.restartEtcdMember(leader)
		}},
		{"scheduler", restart("scheduler")},
		{"controller-manager", restart("controller-manager")},
		{"kubelet", restart("kubelet")},
		{"containerd", func(t *testing.T) {
			pid := fc.containerdPID()
			if pid == 0 {
				t.Fatal("the kubelet's containerd is not running")
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// The kubelet supervises its containerd and starts it again.
			eventually(t, 30*time.Second, func() error {
				if now := fc.containerdPID(); now == 0 || now == pid {
					return fmt.Errorf("containerd not restarted yet")
				}
				return nil
			})
		}},
		{"proxy", func(t *testing.T) {
			fc.kill9("proxy")
			// While the proxy is down its rules lag behind a new Service, and the check
			// says so: it can fail.
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("while-proxy-down-%d", rec.seq.Add(1))},
				Spec: v1.ServiceSpec{Selector: map[string]string{"app": "churn"}, Ports: []v1.ServicePort{{Port: 81, TargetPort: intstr.FromInt32(8080)}}}}
			created, err := fc.client.CoreV1().Services(faultNS).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			missing := fmt.Sprintf("no entry for %s . tcp . 81", created.Spec.ClusterIP)
			eventually(t, 30*time.Second, func() error {
				if problems := fc.unconverged(ctx); !strings.Contains(strings.Join(problems, "\n"), missing) {
					return fmt.Errorf("the check does not see the proxy lagging: %v", problems)
				}
				return nil
			})
			fc.start("proxy")
		}},
	}
	// MIZZEN_FAULT_ROUNDS runs every case that many times, to look for rarer bugs.
	rounds, _ := strconv.Atoi(os.Getenv("MIZZEN_FAULT_ROUNDS"))
	for round := 0; round < max(rounds, 1); round++ {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				w := startFaultWorkload(fc.client, rec)
				time.Sleep(4 * time.Second)
				t.Logf("kill -9 %s", tc.name)
				tc.fault(t)
				time.Sleep(4 * time.Second)
				w.stop()
				fc.converge(t, ctx, convergeDeadline)
				t.Log(rec.summary())
				if r := fc.supervised(); r != "" {
					t.Logf("exited by themselves and restarted by the supervisor so far: %s", r)
				}
				if v := faultViolations(ctx, fc.client, rec); len(v) > 0 {
					t.Errorf("after kill -9 of %s:\n  %s", tc.name, strings.Join(v, "\n  "))
				}
			})
		}
	}
}

// converge waits until nothing is unconverged, and fails with what still is.
func (fc *faultCluster) converge(t *testing.T, ctx context.Context, deadline time.Duration) {
	t.Helper()
	start := time.Now()
	var last []string
	for time.Since(start) < deadline {
		if last = fc.unconverged(ctx); len(last) == 0 {
			t.Logf("converged in %v", time.Since(start).Round(100*time.Millisecond))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("not converged %v after the workload stopped:\n  %s\n%s", deadline, strings.Join(last, "\n  "), fc.logs())
}

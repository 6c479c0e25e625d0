// Package integration runs the scheduler against a real mizzen apiserver on embedded
// etcd, checking what a user would see: bindings, conditions, events, Lease, metrics.
package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/scheduler"
	"mizzen/internal/testing/apiserver"
)

const timeout = 60 * time.Second

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func createNode(t *testing.T, c kubernetes.Interface, name string, milliCPU int64, taints ...v1.Taint) {
	t.Helper()
	ctx := context.Background()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}, Spec: v1.NodeSpec{Taints: taints}}
	created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	created.Status.Capacity = created.Status.Allocatable
	created.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, c kubernetes.Interface, name string, milliCPU int64) {
	t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)}}}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestSchedulerAgainstAPIServer(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	metricsAddr := freeAddr(t)
	done := make(chan error, 1)
	leaderElect := true
	go func() {
		done <- scheduler.Run(ctx, scheduler.Options{RestConfig: cfg, LeaderElect: &leaderElect, MetricsAddr: metricsAddr,
			Identity: "it-replica", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler.Run: %v", err)
		}
	})

	createNode(t, c, "small", 500)
	createNode(t, c, "big", 4000)
	createNode(t, c, "gpu", 8000, v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule})

	createPod(t, c, "fits", 1000)
	createPod(t, c, "too-big", 6000)

	var bound string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		bound = p.Spec.NodeName
		return bound != "", nil
	}); err != nil {
		t.Fatalf("pod was not bound: %v", err)
	}
	if bound != "big" {
		t.Errorf("pod bound to %q, want big", bound)
	}

	want := "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. " +
		"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.."
	var cond *v1.PodCondition
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodScheduled {
				cond = &p.Status.Conditions[i]
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no PodScheduled condition on the unschedulable pod: %v", err)
	}
	if cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonUnschedulable || cond.Message != want {
		t.Errorf("condition %s/%s %q\nwant False/Unschedulable %q", cond.Status, cond.Reason, cond.Message, want)
	}

	// The FailedScheduling event, readable through both event APIs.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "too-big" && e.Reason == "FailedScheduling" {
				if e.Message != want || e.Type != v1.EventTypeWarning {
					return false, fmt.Errorf("event %s %q", e.Type, e.Message)
				}
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("FailedScheduling event: %v", err)
	}

	lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "it-replica" {
		t.Errorf("lease: %v %+v", err, lease)
	}

	// Cordon-free fix: a big node arrives and the parked pod is placed there.
	createNode(t, c, "huge", 16000)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "huge", nil
	}); err != nil {
		t.Errorf("parked pod not placed on the new node: %v", err)
	}

	// The attempt is counted once the binding call returns, which can be after the
	// pod shows its node: poll.
	const scheduledTwice = `scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 2`
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, scheduledTwice), nil
	}); err != nil {
		t.Errorf("metrics do not count 2 scheduled attempts (%v):\n%s", err, grep(body, "scheduler_schedule_attempts_total"))
	}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package integration

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/scheduler"
	"mizzen/internal/testing/apiserver"
)

// TestPreemptionAgainstAPIServer: a pod of a high PriorityClass evicts a lower-priority
// pod, is nominated through pods/status, and lands on the freed node.
func TestPreemptionAgainstAPIServer(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	leaderElect := false
	go func() {
		done <- scheduler.Run(ctx, scheduler.Options{RestConfig: cfg, LeaderElect: &leaderElect, MetricsAddr: "0",
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNode(t, c, "only", 1000)
	createPod(t, c, "low", 800)
	waitBound(t, c, "low", "only")

	high := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "high"},
		Spec: v1.PodSpec{PriorityClassName: "high", Containers: []v1.Container{{Name: "c", Image: "busybox",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("800m")}}}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are deleted gracefully by the apiserver; the victim is gone (or terminating)
	// and the preemptor is nominated, then bound once the victim disappears.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "low", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.DeletionTimestamp != nil, nil
	}); err != nil {
		t.Fatalf("victim was not deleted: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "high", metav1.GetOptions{})
		return err == nil && (p.Status.NominatedNodeName == "only" || p.Spec.NodeName == "only"), nil
	}); err != nil {
		t.Fatalf("preemptor was not nominated: %v", err)
	}
	// Without a kubelet, a gracefully deleted pod stays terminating: finish it as the
	// kubelet would, so the room is really freed.
	_ = c.CoreV1().Pods("default").Delete(ctx, "low", *metav1.NewDeleteOptions(0))
	waitBound(t, c, "high", "only")
}

func waitBound(t *testing.T, c kubernetes.Interface, name, node string) {
	t.Helper()
	var got string
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p.Spec.NodeName
		return got != "", nil
	}); err != nil {
		t.Fatalf("%s not bound: %v", name, err)
	}
	if got != node {
		t.Errorf("%s bound to %q, want %q", name, got, node)
	}
}

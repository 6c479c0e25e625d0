package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// parallel runs fn(0..n-1) on 32 goroutines and fails on the first error.
func parallel(b *testing.B, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEndToEnd5000Nodes schedules pending pods through a real apiserver with 5,000
// nodes and reports pods/s. The client rate limits are raised (upstream's default qps 50
// would cap bindings at 50/s).
func BenchmarkEndToEnd5000Nodes(b *testing.B) {
	const nodes, pods = 5000, 2000
	cfg := apiserver.Start(b)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	parallel(b, nodes, func(i int) error {
		n, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i),
			Labels: map[string]string{v1.LabelHostname: fmt.Sprintf("node-%04d", i), v1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%5)}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("64Gi"), v1.ResourcePods: resource.MustParse("110")}
		n.Status.Capacity = n.Status.Allocatable
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	configFile := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(configFile, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"clientConnection:\n  qps: 5000\n  burst: 5000\nleaderElection:\n  leaderElect: false\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for iter := 0; iter < b.N; iter++ {
		ns := fmt.Sprintf("bench-%d", iter)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// Pods wait first, so the measurement is the scheduler's own throughput: from its
		// start (informer sync of 5,000 nodes and the pods included) to the last binding.
		parallel(b, pods, func(i int) error {
			_, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Labels: map[string]string{"app": fmt.Sprintf("a%d", i%20)}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}}}}}, metav1.CreateOptions{})
			return err
		})
		start := time.Now()
		schedCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- scheduler.Run(schedCtx, scheduler.Options{RestConfig: cfg, ConfigFile: configFile, MetricsAddr: "0",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
		bound := 0
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			bound = 0
			for _, p := range list.Items {
				if p.Spec.NodeName != "" {
					bound++
				}
			}
			return bound == pods, nil
		})
		elapsed := time.Since(start)
		cancel()
		<-done
		if err != nil {
			b.Fatalf("%d of %d pods bound: %v", bound, pods, err)
		}
		b.Logf("%d pending pods all bound %v after the scheduler started", pods, elapsed)
		b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
	}
}

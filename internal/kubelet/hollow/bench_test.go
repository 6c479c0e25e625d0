package hollow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// BenchmarkHollowNodeMemory runs hollow nodes with 30 pods each against a real apiserver
// and reports the heap and stack growth per node. The apiserver runs in the same process, so its
// own growth for those pods is included: the figure is an upper bound.
func BenchmarkHollowNodeMemory(b *testing.B) {
	const nodes, podsPerNode = 20, 30
	cfg := apiserver.Start(b)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Count: nodes, Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	for n := range nodes {
		for i := range podsPerNode {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d-%d", n, i), Namespace: "default"},
				Spec: v1.PodSpec{NodeName: fmt.Sprintf("hollow-node-%d", n),
					Containers: []v1.Container{{Name: "c", Image: "registry.local/pause:3.10"}}},
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		running := runningPods(ctx, client)
		if running == nodes*podsPerNode {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d pods running", running, nodes*podsPerNode)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/nodes/(1<<20), "heap-MiB/node")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/nodes/(1<<20), "stack-MiB/node")
	b.ReportMetric(float64(runtime.NumGoroutine())/nodes, "goroutines/node")
	cancel()
	if err := <-done; err != nil {
		b.Error(err)
	}
}

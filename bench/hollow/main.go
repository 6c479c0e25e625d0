// Command hollow measures the memory of hollow nodes: it starts a `mizzen server`
// (without an agent), runs `mizzen hollow-nodes --count N` as its own process, waits
// until every node is Ready, then has the scheduler place pods on them and waits until
// every pod is Running, reporting the hollow-nodes process's resident memory per node
// at each step.
//
//	make build && go run ./bench/hollow -nodes 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	nodes := flag.Int("nodes", 1000, "hollow nodes")
	podsPerNode := flag.Int("pods-per-node", 3, "pods placed on each node after they are Ready")
	flag.Parse()
	if err := run(*bin, *nodes, *podsPerNode); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(bin string, nodes, podsPerNode int) error {
	srv, err := benchutil.StartServer(bin, "--disable", "agent")
	if err != nil {
		return err
	}
	defer srv.Stop()
	hollow := exec.Command(bin, "hollow-nodes", "--count", strconv.Itoa(nodes), "--kubeconfig", srv.Kubeconfig)
	if err := hollow.Start(); err != nil {
		return err
	}
	defer func() { _ = hollow.Process.Signal(os.Interrupt); _ = hollow.Wait() }()
	ctx := context.Background()
	c := srv.Client

	t0 := time.Now()
	if err := waitFor(10*time.Minute, func() (bool, error) {
		ready, err := readyNodes(ctx, c)
		return ready == nodes, err
	}); err != nil {
		return fmt.Errorf("nodes Ready: %w", err)
	}
	fmt.Printf("%d hollow nodes Ready %v after start\n", nodes, time.Since(t0).Round(time.Second))
	time.Sleep(15 * time.Second) // a full lease and status period, so the figure is steady state
	report(hollow.Process.Pid, nodes, "idle")

	total := nodes * podsPerNode
	t1 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%06d", i)},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
				}
				if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
				}
			}
		}()
	}
	wg.Wait()
	if err := waitFor(10*time.Minute, func() (bool, error) {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == total, nil
	}); err != nil {
		return fmt.Errorf("pods Running: %w", err)
	}
	fmt.Printf("%d pods Running %v after the first create\n", total, time.Since(t1).Round(time.Second))
	time.Sleep(15 * time.Second)
	report(hollow.Process.Pid, nodes, fmt.Sprintf("with %d pods each", podsPerNode))
	return nil
}

func report(pid, nodes int, when string) {
	p := benchutil.ProcStats(pid)
	fmt.Printf("hollow-nodes process %s: RSS %.0f MiB = %.2f MiB per node (private %.0f MiB = %.2f MiB per node); %.1f CPU s so far\n",
		when, p.RSSMiB, p.RSSMiB/float64(nodes), p.AnonMiB, p.AnonMiB/float64(nodes), p.CPUSeconds)
}

func readyNodes(ctx context.Context, c *kubernetes.Clientset) (int, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}

// waitFor polls cond every second until it holds, fails, or timeout passes.
func waitFor(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not done after %v", timeout)
			}
			return err
		}
		time.Sleep(time.Second)
	}
}

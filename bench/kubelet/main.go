// Command kubelet measures pod startup on a real single-node `mizzen server` (apiserver,
// scheduler, controller-manager and the agent with its own containerd): the time from
// a pod's create call until a watch shows all its containers started, as upstream's
// pod startup SLO counts it (image present). It runs as root with Debian's containerd,
// runc and CNI plugins installed.
//
//	make build && go run ./bench/kubelet
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/kubelet/containerd"
)

// image is present on every node: the sandbox image the agent imports at start.
const image = "registry.k8s.io/pause:3.10"

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary (mizzen-pause beside it)")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

func run(bin string) error {
	dir, err := os.MkdirTemp("", "mizzen-bench-kubelet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port := freePort()
	// A bridge and pod CIDR of its own, so a cluster already running here is left alone.
	const bridge = "mzn-bench"
	defer func() {
		_ = exec.Command("ip", "link", "delete", bridge).Run()
		_ = exec.Command("nft", "delete", "table", "ip", "mizzen-"+bridge).Run()
	}()
	srv := exec.Command(bin, "server", "--data-dir", dir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--pod-bridge", bridge, "--cluster-cidr", "10.201.0.0/16", "--kubelet-port", strconv.Itoa(freePort()))
	srv.Stderr = nil
	if err := srv.Start(); err != nil {
		return err
	}
	runtime := containerd.Options{DataDir: filepath.Join(dir, "agent", "containerd")}
	defer func() {
		if err := containerd.RemoveAllPods(context.Background(), runtime); err != nil {
			fmt.Fprintln(os.Stderr, "removing the pods from containerd:", err)
		}
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
	}()
	ctx := context.Background()
	var client *kubernetes.Clientset
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("no Ready node within 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
		if err != nil {
			continue
		}
		cfg.QPS, cfg.Burst = -1, 0
		c := kubernetes.NewForConfigOrDie(cfg)
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 {
			continue
		}
		ready := false
		for _, cond := range nodes.Items[0].Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if ready {
			client = c
			break
		}
	}
	// Each figure starts on a node at rest: the previous pods are gone from the runtime
	// too, not only from the API.
	settle := func() { _ = containerd.RemoveAllPods(ctx, runtime) }
	// One pod first, as upstream's single-pod figure.
	single, err := startPods(ctx, client, "single", 1, 1)
	if err != nil {
		return err
	}
	settle()
	fmt.Printf("single pod: %v from create to all containers started\n", single[0].Round(time.Millisecond))
	burst, err := startPods(ctx, client, "burst", 20, 20)
	if err != nil {
		return err
	}
	settle()
	fmt.Printf("burst of 20 created at once: p50 %v, p99 %v\n", percentile(burst, 0.5).Round(time.Millisecond), percentile(burst, 0.99).Round(time.Millisecond))
	steady, err := startPods(ctx, client, "steady", 100, 10)
	if err != nil {
		return err
	}
	fmt.Printf("100 pods created 10 at a time: p50 %v, p99 %v\n", percentile(steady, 0.5).Round(time.Millisecond), percentile(steady, 0.99).Round(time.Millisecond))
	return nil
}

// startPods creates n pods, at most concurrent at a time (each batch waits for the one
// before to be started), and returns each one's create-to-started latency.
func startPods(ctx context.Context, c *kubernetes.Clientset, prefix string, n, concurrent int) ([]time.Duration, error) {
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "bench=" + prefix})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	var out []time.Duration
	started := map[string]bool{}
	for b := 0; b < n; b += concurrent {
		var wg sync.WaitGroup
		for i := b; i < b+concurrent && i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				name := fmt.Sprintf("%s-%03d", prefix, i)
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": prefix}},
					Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64),
						Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}}}}
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
				if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
				}
			}(i)
		}
		wg.Wait()
		want := b + concurrent
		if want > n {
			want = n
		}
		timeout := time.After(2 * time.Minute)
		for len(out) < want {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Error {
					return nil, fmt.Errorf("watch error: %v", ev.Object)
				}
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || started[pod.Name] || !allStarted(pod) {
					continue
				}
				started[pod.Name] = true
				mu.Lock()
				out = append(out, time.Since(created[pod.Name]))
				mu.Unlock()
			case <-timeout:
				return nil, fmt.Errorf("%d of %d pods started after 2 minutes", len(out), want)
			}
		}
	}
	// The next figure starts on a node at rest, and the run leaves no sandbox behind.
	sel := metav1.ListOptions{LabelSelector: "bench=" + prefix}
	if err := c.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pods, err := c.CoreV1().Pods("default").List(ctx, sel)
		if err == nil && len(pods.Items) == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s pods not gone 2 minutes after their deletion", prefix)
		}
	}
}

func allStarted(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// Command apiserver benchmarks a real `mizzen server` process (embedded etcd and the
// apiserver, no other components) through client-go: time to /readyz, idle memory,
// pod creates/s with concurrent clients, gets/s, list latency of many pods, memory
// holding them, and watch fan-out. It prints one line per figure for BENCHMARKS.md.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/apiserver
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	pods := flag.Int("pods", 10000, "pods to create")
	workers := flag.Int("workers", 50, "concurrent clients")
	watchers := flag.Int("watchers", 1000, "watchers for the fan-out figure")
	watchEvents := flag.Int("watch-events", 200, "changes made while the watchers watch")
	flag.Parse()
	if err := run(*bin, *pods, *workers, *watchers, *watchEvents); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(bin string, nPods, workers, nWatchers, nWatchEvents int) error {
	dir, err := os.MkdirTemp("", "mizzen-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port := benchutil.FreePort()
	start := time.Now()
	cmd := exec.Command(bin, "server", "--data-dir", dir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--dashboard-port", "0", "--disable", "agent,scheduler,controller-manager,ingress")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var cfg *rest.Config
	for {
		if time.Since(start) > 60*time.Second {
			return fmt.Errorf("server not ready after 60s")
		}
		if c, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig")); err == nil {
			cl := kubernetes.NewForConfigOrDie(c)
			if body, err := cl.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
				cfg = c
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("start to /readyz: %v\n", time.Since(start).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	fmt.Printf("RSS idle (etcd + apiserver, one process): %.0f MiB\n", benchutil.ProcStats(cmd.Process.Pid).RSSMiB)

	cfg.QPS, cfg.Burst = -1, 0
	ctx := context.Background()
	newClient := func() *kubernetes.Clientset { return kubernetes.NewForConfigOrDie(rest.CopyConfig(cfg)) }
	client := newClient()
	// Pod creates pass ServiceAccount admission, as upstream's do: the namespaces need
	// the "default" account the controller-manager (not running here) would create.
	if err := ensureDefaultServiceAccount(ctx, client, "default"); err != nil {
		return err
	}

	// Creates: workers goroutines, as many client-go workers.
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(nPods) {
					return
				}
				pod := benchPod(fmt.Sprintf("pod-%05d", i))
				s := time.Now()
				if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
				}
				lat[w] = append(lat[w], time.Since(s))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	fmt.Printf("pod creates: %.0f/s with %d clients (p50 %v, p99 %v)\n", float64(nPods)/elapsed.Seconds(), workers,
		benchutil.Percentile(all, 0.5).Round(time.Microsecond), benchutil.Percentile(all, 0.99).Round(time.Microsecond))

	// Gets.
	var gets atomic.Int64
	getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for getCtx.Err() == nil {
				name := fmt.Sprintf("pod-%05d", rand.IntN(nPods))
				if _, err := client.CoreV1().Pods("default").Get(getCtx, name, metav1.GetOptions{}); err == nil {
					gets.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	fmt.Printf("pod gets: %.0f/s with %d clients\n", float64(gets.Load())/5, workers)

	// Lists of every pod.
	for _, rv := range []string{"", "0"} {
		var ds []time.Duration
		for i := 0; i < 10; i++ {
			s := time.Now()
			list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				return err
			}
			ds = append(ds, time.Since(s))
			if len(list.Items) != nPods {
				return fmt.Errorf("list returned %d pods", len(list.Items))
			}
		}
		label := "consistent"
		if rv == "0" {
			label = "resourceVersion=0"
		}
		fmt.Printf("list %d pods (%s, protobuf): p50 %v, max %v\n", nPods, label, benchutil.Percentile(ds, 0.5).Round(time.Millisecond), benchutil.Percentile(ds, 1).Round(time.Millisecond))
	}
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = "application/json", "application/json"
	jsonClient := kubernetes.NewForConfigOrDie(jsonCfg)
	var ds []time.Duration
	for i := 0; i < 10; i++ {
		s := time.Now()
		if _, err := jsonClient.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		ds = append(ds, time.Since(s))
	}
	fmt.Printf("list %d pods (consistent, JSON): p50 %v\n", nPods, benchutil.Percentile(ds, 0.5).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	fmt.Printf("RSS holding %d pods: %.0f MiB\n", nPods, benchutil.ProcStats(cmd.Process.Pid).RSSMiB)

	// Watch fan-out: nWatchers watch pods in a namespace; nWatchEvents changes; each event
	// carries its write time.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fanout"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace fanout: %w", err)
	}
	if err := ensureDefaultServiceAccount(ctx, client, "fanout"); err != nil {
		return err
	}
	var delivered atomic.Int64
	delays := make([][]time.Duration, nWatchers)
	var ready sync.WaitGroup
	done := make(chan struct{})
	var finished sync.WaitGroup
	clients := []*kubernetes.Clientset{}
	for i := 0; i < (nWatchers+499)/500; i++ {
		clients = append(clients, newClient())
	}
	for w := 0; w < nWatchers; w++ {
		ready.Add(1)
		finished.Add(1)
		go func(w int) {
			defer finished.Done()
			wi, err := clients[w%len(clients)].CoreV1().Pods("fanout").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
			ready.Done()
			if err != nil {
				fmt.Fprintln(os.Stderr, "watch:", err)
				return
			}
			defer wi.Stop()
			for {
				select {
				case ev := <-wi.ResultChan():
					if ev.Type != watch.Added {
						continue
					}
					pod := ev.Object.(*corev1.Pod)
					sent, _ := time.Parse(time.RFC3339Nano, pod.Annotations["sent"])
					delays[w] = append(delays[w], time.Since(sent))
					if delivered.Add(1) == int64(nWatchers*nWatchEvents) {
						close(done)
					}
				case <-done:
					return
				}
			}
		}(w)
	}
	ready.Wait()
	time.Sleep(time.Second)
	t1 := time.Now()
	for i := 0; i < nWatchEvents; i++ {
		pod := benchPod(fmt.Sprintf("w-%04d", i))
		pod.Annotations = map[string]string{"sent": time.Now().Format(time.RFC3339Nano)}
		if _, err := client.CoreV1().Pods("fanout").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		fmt.Printf("watch fan-out: only %d of %d events delivered in 120s\n", delivered.Load(), nWatchers*nWatchEvents)
	}
	fanout := time.Since(t1)
	finished.Wait()
	var dl []time.Duration
	for _, d := range delays {
		dl = append(dl, d...)
	}
	fmt.Printf("watch fan-out: %d watchers x %d events: %.0f events/s delivered, delay p50 %v p99 %v\n", nWatchers, nWatchEvents,
		float64(delivered.Load())/fanout.Seconds(), benchutil.Percentile(dl, 0.5).Round(time.Microsecond), benchutil.Percentile(dl, 0.99).Round(time.Microsecond))
	return nil
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench", "tier": "backend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
}

// ensureDefaultServiceAccount creates the namespace's "default" ServiceAccount.
func ensureDefaultServiceAccount(ctx context.Context, client kubernetes.Interface, namespace string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default service account in %s: %w", namespace, err)
	}
	return nil
}

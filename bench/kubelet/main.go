// Command kubelet measures pod startup on a real single node: `mizzen server`
// (apiserver, scheduler, controller-manager) and `mizzen kubelet` as its own process
// with its own containerd: the time from a pod's create call until a watch shows all its
// containers started, as upstream's pod startup SLO counts it (image present), and the
// kubelet's memory. It runs as root with Debian's containerd, runc and CNI plugins
// installed.
//
//	make build && go run ./bench/kubelet
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/kubelet/containerd"
)

// image is present on every node: the sandbox image the agent imports at start.
const image = "registry.k8s.io/pause:3.10"

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary (mizzen-pause beside it)")
	floor := flag.String("floor-slots", "4", "first measure the runtime alone, through CRI with no kubelet, starting this many pods at a time (comma-separated counts; empty: skip)")
	hostNetwork := flag.Bool("floor-host-network", false, "measure the runtime alone with host-network sandboxes too (no network namespace, no CNI)")
	flag.Parse()
	// The host's state shifts these figures from run to run (see
	// docs/testing-with-containerd.md): say what it was.
	fmt.Println("host before the run:", hostState())
	// Every process the benchmark starts is counted in one cpuacct cgroup.
	cpu, err := benchutil.CPUAccount("mizzen-bench-kubelet")
	if err == nil && *floor != "" {
		err = measureFloor(*bin, *floor, false, cpu)
		if err == nil && *hostNetwork {
			err = measureFloor(*bin, *floor, true, cpu)
		}
	}
	if err == nil {
		err = run(*bin, cpu)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// hostState counts what makes every container start on this host slower: mounts, and
// memory cgroups (dying ones of removed containers included).
func hostState() string {
	mounts, cgroups := "?", "?"
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		mounts = strconv.Itoa(strings.Count(string(b), "\n"))
	}
	if b, err := os.ReadFile("/proc/cgroups"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "memory" {
				cgroups = f[2]
			}
		}
	}
	return mounts + " mounts, " + cgroups + " memory cgroups"
}

// measureFloor runs runtimeFloor in a directory of its own.
func measureFloor(bin, slots string, hostNetwork bool, cpu func() time.Duration) error {
	var counts []int
	for _, s := range strings.Split(slots, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-floor-slots: %q is not a positive count", s)
		}
		counts = append(counts, n)
	}
	dir, err := os.MkdirTemp("", "mizzen-bench-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return runtimeFloor(bin, dir, 20, counts, hostNetwork, cpu)
}

func run(bin string, cpu func() time.Duration) error {
	// A bridge and pod CIDR of its own, so a cluster already running here is left alone.
	const bridge = "mzn-bench"
	srv, err := benchutil.StartServer(bin, "--disable", "agent", "--cluster-cidr", "10.201.0.0/16")
	if err != nil {
		return err
	}
	defer srv.Stop()
	// The kubelet runs as its own process, as upstream's does, so its memory is its own;
	// it supervises its containerd as the agent in `mizzen server` does.
	runtime := containerd.Options{DataDir: filepath.Join(srv.Dir, "containerd")}
	kubelet := exec.Command(bin, "kubelet", "--kubeconfig", srv.Kubeconfig, "--hostname-override", "bench-node",
		"--root-dir", filepath.Join(srv.Dir, "kubelet"), "--containerd-data-dir", runtime.DataDir,
		"--pause-binary", filepath.Join(filepath.Dir(bin), "mizzen-pause"), "--cni-bridge", bridge,
		"--port", strconv.Itoa(benchutil.FreePort()),
		// Disk thresholds as the bundled agent's: upstream's 15% would refuse the
		// benchmark's pods on a machine whose disk is merely busy.
		"--eviction-hard", "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%")
	benchutil.DieWithParent(kubelet)
	if err := kubelet.Start(); err != nil {
		return err
	}
	defer func() {
		if err := containerd.RemoveAllPods(context.Background(), runtime); err != nil {
			fmt.Fprintln(os.Stderr, "removing the pods from containerd:", err)
		}
		_ = kubelet.Process.Signal(os.Interrupt)
		_ = kubelet.Wait()
		_ = exec.Command("ip", "link", "delete", bridge).Run()
		_ = exec.Command("nft", "delete", "table", "ip", "mizzen-"+bridge).Run()
	}()
	ctx := context.Background()
	client := srv.Client
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("no Ready node within 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
		node, err := client.CoreV1().Nodes().Get(ctx, "bench-node", metav1.GetOptions{})
		if err != nil || node.Spec.PodCIDR == "" {
			continue
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if ready {
			break
		}
	}
	idle := benchutil.ProcStats(kubelet.Process.Pid)
	fmt.Printf("kubelet idle: RSS %.0f MiB, private %.0f MiB\n", idle.RSSMiB, idle.AnonMiB)
	// Each figure starts on a node at rest: the previous pods are gone from the runtime
	// too, not only from the API.
	settle := func() { _ = containerd.RemoveAllPods(ctx, runtime) }
	noop := func() {}
	// One pod first, as upstream's single-pod figure.
	single, err := startPods(ctx, client, "single", 1, 1, noop)
	if err != nil {
		return err
	}
	settle()
	fmt.Printf("single pod: %v from create to all containers started\n", single[0].Round(time.Millisecond))
	// The mizzen processes' part of the CPU: the server (apiserver with its etcd,
	// scheduler, controller-manager) and the kubelet; the rest is the runtime's.
	mizzenCPU := func() (server, kubeletCPU float64) {
		return benchutil.ProcStats(srv.Cmd.Process.Pid).CPUSeconds, benchutil.ProcStats(kubelet.Process.Pid).CPUSeconds
	}
	cpu0 := cpu()
	server0, kubelet0 := mizzenCPU()
	var cpuBurst time.Duration
	var serverBurst, kubeletBurst float64
	burst, err := startPods(ctx, client, "burst", 20, 20, func() {
		cpuBurst = cpu() - cpu0
		server1, kubelet1 := mizzenCPU()
		serverBurst, kubeletBurst = server1-server0, kubelet1-kubelet0
	})
	if err != nil {
		return err
	}
	settle()
	if os.Getenv("BENCH_VERBOSE") != "" {
		fmt.Println("burst latencies:", burst)
	}
	fmt.Printf("burst of 20 created at once: p50 %v, p99 %v; %.0f ms CPU per pod (every process of the bench), of which mizzen server %.0f ms, kubelet %.0f ms\n",
		benchutil.Percentile(burst, 0.5).Round(time.Millisecond), benchutil.Percentile(burst, 0.99).Round(time.Millisecond),
		float64(cpuBurst.Milliseconds())/20, serverBurst*1000/20, kubeletBurst*1000/20)
	steady, err := startPods(ctx, client, "steady", 100, 10, func() {
		time.Sleep(10 * time.Second) // a status and relist period with every pod running
		p := benchutil.ProcStats(kubelet.Process.Pid)
		fmt.Printf("kubelet with 100 pods running: RSS %.0f MiB, private %.0f MiB\n", p.RSSMiB, p.AnonMiB)
	})
	if err != nil {
		return err
	}
	fmt.Printf("100 pods created 10 at a time: p50 %v, p99 %v\n", benchutil.Percentile(steady, 0.5).Round(time.Millisecond), benchutil.Percentile(steady, 0.99).Round(time.Millisecond))
	return nil
}

// startPods creates n pods, at most concurrent at a time (each batch waits for the one
// before to be started), calls allRunning, deletes them, and returns each one's
// create-to-started latency.
func startPods(ctx context.Context, c *kubernetes.Clientset, prefix string, n, concurrent int, allRunning func()) ([]time.Duration, error) {
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "bench=" + prefix})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	var out []time.Duration
	started := map[string]bool{}
	bound := map[string]time.Time{}
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
				if ok && pod.Spec.NodeName != "" && bound[pod.Name].IsZero() {
					bound[pod.Name] = time.Now()
				}
				if !ok || started[pod.Name] || !allStarted(pod) {
					continue
				}
				started[pod.Name] = true
				mu.Lock()
				out = append(out, time.Since(created[pod.Name]))
				if os.Getenv("BENCH_VERBOSE") != "" {
					fmt.Printf("  %s: bound after %v, running %v later\n", pod.Name,
						bound[pod.Name].Sub(created[pod.Name]).Round(time.Millisecond), time.Since(bound[pod.Name]).Round(time.Millisecond))
				}
				mu.Unlock()
			case <-timeout:
				return nil, fmt.Errorf("%d of %d pods started after 2 minutes", len(out), want)
			}
		}
	}
	allRunning()
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

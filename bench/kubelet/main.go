// Command kubelet measures pod startup on a real single node: `mizzen server`
// (apiserver, scheduler, controller-manager, no agent), a containerd the benchmark
// runs, and a kubelet as its own process: the time from a pod's create call until a
// watch shows all its containers started, as upstream's pod startup SLO counts it
// (image present), and the kubelet's CPU and memory. With -upstream DIR it alternates
// mizzen's kubelet with upstream's (DIR/kubelet) on the same control plane, the same
// containerd binary and configuration (fresh state each run), the same pod network
// and the same pods, and prints the medians and the ratios mizzen/upstream. It runs as
// root with Debian's containerd, runc and CNI plugins installed.
//
//	make build && go run ./bench/kubelet
//	make build && go run ./bench/kubelet -upstream /work/upstream/bin -rounds 2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/podcgroups"
)

// image is present on every node: the sandbox image imported when containerd starts.
const image = "registry.k8s.io/pause:3.10"

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary (mizzen-pause beside it)")
	floor := flag.String("floor-slots", "4", "measure the runtime alone at the start of every round, through CRI with no kubelet, starting this many pods at a time (comma-separated counts, the first compared with the kubelets; empty: skip)")
	hostNetwork := flag.Bool("floor-host-network", false, "measure the runtime alone with host-network sandboxes too (no network namespace, no CNI)")
	upstream := flag.String("upstream", "", "directory of upstream's binaries: run upstream's kubelet (DIR/kubelet) too, alternating with mizzen's")
	rounds := flag.Int("rounds", 1, "runs of each kubelet, alternating")
	dropCaches := flag.Bool("drop-caches", true, "write back and drop the page cache before each phase (the floor, each kubelet), which frees the memory cgroups of removed containers that their cached pages kept: a few hundred per phase, and they slow every later container start, so each phase would run on a slower host than the one before")
	singles := flag.Int("singles", 5, "pods started one at a time, each on a node at rest, for the single-pod figure (their median)")
	flag.Parse()
	if *singles < 1 {
		fmt.Fprintln(os.Stderr, "-singles: at least one pod")
		os.Exit(2)
	}
	// The CRI client logs through klog every NotFound of a sandbox the kubelet removed
	// while the benchmark clears the runtime between figures, which RemoveAllPods takes as done.
	benchutil.QuietKlog()
	// The host's state shifts these figures from run to run (see
	// docs/testing-with-containerd.md): say what it was.
	fmt.Println("host before the run:", hostState(), "; load average", loadavg())
	// Every process the benchmark starts is counted in one cpuacct cgroup.
	cpu, err := benchutil.CPUAccount(cpuGroup)
	if err == nil && *floor != "" && *hostNetwork {
		_, err = measureFloor(*bin, *floor, *singles, true, cpu)
	}
	sides := []string{"mizzen"}
	if *upstream != "" {
		sides = append(sides, "upstream")
	}
	results := map[string][]result{}
	for round := 0; err == nil && round < *rounds; round++ {
		// Each round after the first starts with the side the previous one ended with
		// (A B, B A, A B, ...): whichever goes first runs on the machine the floor or
		// the previous round left, so a fixed order favours one side.
		order := slices.Clone(sides)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		// The floor in every round, not once: the host drifts from round to round, and
		// one floor measured before them all made the kubelets' ratios to it move by a
		// fifth from run to run.
		if *floor != "" {
			fmt.Printf("\n== round %d, the runtime alone (load average %s)\n", round+1, loadavg())
			if *dropCaches {
				dropPageCache()
			}
			var f result
			if f, err = measureFloor(*bin, *floor, *singles, false, cpu); err != nil {
				err = fmt.Errorf("the runtime alone, round %d: %w", round+1, err)
				break
			}
			results[floorSide] = append(results[floorSide], f)
		}
		for _, side := range order {
			fmt.Printf("\n== round %d, %s kubelet (load average %s)\n", round+1, side, loadavg())
			if *dropCaches {
				dropPageCache()
			}
			var r result
			if r, err = run(*bin, side, *upstream, *singles, round == 0, cpu); err != nil {
				err = fmt.Errorf("%s kubelet, round %d: %w", side, round+1, err)
				break
			}
			results[side] = append(results[side], r)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	printMedians(sides, results)
}

// result is one run's figures.
type result struct {
	single                time.Duration
	burst50, burst99      time.Duration
	steady50, steady99    time.Duration
	kubeletCPU            float64 // seconds, from the node Ready to the last pod gone
	rssIdle, rss100       float64 // MiB, Ready with no pod and with 100 pods running
	anonIdle, anon100     float64 // their private (anonymous) part, without the binary's pages
	loadBurst, loadSteady float64 // one-minute load average at the end of each figure
}

// floorSide is the runtime alone's column among the results.
const floorSide = "floor"

// printMedians prints each side's medians over its runs (the floor's too, when it was
// measured), and the ratios mizzen/upstream and mizzen/floor.
func printMedians(sides []string, results map[string][]result) {
	withFloor := len(results[floorSide]) > 0
	columns := slices.Clone(sides)
	if withFloor {
		columns = append(columns, floorSide)
	}
	fmt.Printf("\n%-31s", fmt.Sprintf("medians of %d run(s) each", len(results[sides[0]])))
	for _, s := range columns {
		fmt.Printf(" %12s", s)
	}
	if len(sides) == 2 {
		fmt.Printf("  mizzen/upstream")
	}
	if withFloor {
		fmt.Printf("  mizzen/floor")
	}
	fmt.Println()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, f := range []struct {
		name string
		get  func(result) float64
	}{
		{"single pod, ms", func(r result) float64 { return ms(r.single) }},
		{"20 at once p50, ms", func(r result) float64 { return ms(r.burst50) }},
		{"20 at once p99, ms", func(r result) float64 { return ms(r.burst99) }},
		{"100 10 at a time p50, ms", func(r result) float64 { return ms(r.steady50) }},
		{"100 10 at a time p99, ms", func(r result) float64 { return ms(r.steady99) }},
		{"kubelet CPU, s", func(r result) float64 { return r.kubeletCPU }},
		{"kubelet RSS idle, MiB", func(r result) float64 { return r.rssIdle }},
		{"kubelet RSS 100 pods, MiB", func(r result) float64 { return r.rss100 }},
		{"kubelet private idle, MiB", func(r result) float64 { return r.anonIdle }},
		{"kubelet private 100 pods, MiB", func(r result) float64 { return r.anon100 }},
		{"load average (burst)", func(r result) float64 { return r.loadBurst }},
		{"load average (100 pods)", func(r result) float64 { return r.loadSteady }},
	} {
		fmt.Printf("%-31s", f.name)
		median := func(side string) float64 {
			v := make([]float64, 0, len(results[side]))
			for _, r := range results[side] {
				v = append(v, f.get(r))
			}
			sort.Float64s(v)
			// The lower median of an even count, as the other benchmarks take it.
			return v[(len(v)-1)/2]
		}
		var meds []float64
		for _, s := range sides {
			meds = append(meds, median(s))
			fmt.Printf(" %12.1f", meds[len(meds)-1])
		}
		// The floor has only the start-up figures.
		floorMed := 0.0
		if withFloor {
			if floorMed = median(floorSide); floorMed != 0 {
				fmt.Printf(" %12.1f", floorMed)
			} else {
				fmt.Printf(" %12s", "-")
			}
		}
		load := strings.HasPrefix(f.name, "load")
		if len(meds) == 2 {
			if meds[1] != 0 && !load {
				fmt.Printf("  %14.2fx", meds[0]/meds[1])
			} else {
				fmt.Printf("  %15s", "")
			}
		}
		if floorMed != 0 && !load {
			fmt.Printf("  %11.2fx", meds[0]/floorMed)
		}
		fmt.Println()
	}
}

// hostState counts what makes every container start on this host slower: mounts, and
// memory cgroups (dying ones of removed containers included).
func hostState() string {
	mounts, cgroups := "?", "?"
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		mounts = strconv.Itoa(strings.Count(string(b), "\n"))
	}
	if n := memoryCgroups(); n >= 0 {
		cgroups = strconv.Itoa(n)
	}
	return mounts + " mounts, " + cgroups + " memory cgroups"
}

// memoryCgroups counts the host's memory cgroups, dying ones included, from
// /proc/cgroups; -1 if it cannot be read.
func memoryCgroups() int {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "memory" {
			if n, err := strconv.Atoi(f[2]); err == nil {
				return n
			}
		}
	}
	return -1
}

// dropPageCache writes back and drops the page cache, which releases the memory
// cgroups of removed containers that only their cached pages kept (see hostState), and
// says how many there were before and after. The kernel frees them over the next
// seconds, not at once: it waits until their count has stopped falling for two.
func dropPageCache() {
	before := hostState()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "dropping the page cache:", err)
		return
	}
	last, steady := memoryCgroups(), 0
	for deadline := time.Now().Add(15 * time.Second); steady < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		if n := memoryCgroups(); n < last {
			last, steady = n, 0
		} else {
			steady++
		}
	}
	fmt.Printf("page cache dropped: %s before, %s after\n", before, hostState())
}

// measureFloor runs runtimeFloor in a directory of its own.
func measureFloor(bin, slots string, singles int, hostNetwork bool, cpu func() time.Duration) (result, error) {
	var counts []int
	for _, s := range strings.Split(slots, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return result{}, fmt.Errorf("-floor-slots: %q is not a positive count", s)
		}
		counts = append(counts, n)
	}
	dir, err := os.MkdirTemp("", "mizzen-bench-floor-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	return runtimeFloor(bin, dir, singles, 20, counts, hostNetwork, cpu)
}

// startKubelet starts side's kubelet against n, and returns it with a clean-up of
// what it leaves on the host.
func startKubelet(bin, side, upstreamDir string, n *node, first bool) (*exec.Cmd, func(), error) {
	if side == "upstream" {
		return startUpstreamKubelet(upstreamDir, n, first)
	}
	kubelet := exec.Command(bin, "kubelet", "--kubeconfig", n.kubeconfig, "--hostname-override", nodeName,
		"--node-ip", n.nodeIP, "--root-dir", filepath.Join(n.srv.Dir, "kubelet"),
		"--container-runtime-endpoint", n.runtime.Endpoint(), "--cluster-dns", clusterDNS,
		"--port", strconv.Itoa(benchutil.FreePort()),
		// Disk thresholds as the bundled agent's: upstream's 15% would refuse the
		// benchmark's pods on a machine whose disk is merely busy.
		"--eviction-hard", "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%")
	if first {
		fmt.Println("mizzen kubelet:", strings.Join(kubelet.Args, " "))
	}
	log, err := os.Create(filepath.Join(n.srv.Dir, "kubelet.log"))
	if err != nil {
		return nil, func() {}, err
	}
	defer log.Close()
	kubelet.Stdout, kubelet.Stderr = log, log
	benchutil.DieWithParent(kubelet)
	return kubelet, func() {}, kubelet.Start()
}

// run measures one kubelet on a fresh node: singles pods one at a time, 20 at once, 100
// ten at a time.
func run(bin, side, upstreamDir string, singles int, first bool, cpu func() time.Duration) (r result, err error) {
	n, err := startNode(bin)
	if err != nil {
		return r, err
	}
	kubelet, cleanup, err := startKubelet(bin, side, upstreamDir, n, first)
	var pods createdPods
	defer func() {
		stopKubelet(kubelet)
		n.stop()
		cleanup()
		pods.removeCgroups()
	}()
	if err != nil {
		return r, err
	}
	ctx := context.Background()
	client := n.srv.Client
	exited := func() bool {
		return kubelet.ProcessState != nil || benchutil.ProcStats(kubelet.Process.Pid).CPUSeconds < 0
	}
	if err := n.waitReady(ctx, exited); err != nil {
		return r, fmt.Errorf("%w; see %s", err, n.srv.Dir)
	}
	idle := benchutil.ProcStats(kubelet.Process.Pid)
	r.rssIdle, r.anonIdle = idle.RSSMiB, idle.AnonMiB
	fmt.Printf("kubelet idle: RSS %.0f MiB, private %.0f MiB\n", idle.RSSMiB, idle.AnonMiB)
	// Each figure starts on a node at rest: the previous pods are gone from the runtime
	// too, not only from the API.
	settle := func() { _ = containerd.RemoveAllPods(ctx, n.runtime) }
	noop := func() {}
	// One pod at a time first, as upstream's single-pod figure; their median, as one
	// pod alone moved by half from round to round.
	var single []time.Duration
	for i := range singles {
		one, err := startPods(ctx, client, &pods, fmt.Sprintf("single-%d", i), 1, 1, noop)
		if err != nil {
			return r, err
		}
		settle()
		single = append(single, one[0])
	}
	r.single = benchutil.Percentile(single, 0.5)
	fmt.Printf("single pod: median %v of %s from create to all containers started (load average %s)\n",
		r.single.Round(time.Millisecond), roundedList(single), loadavg())
	// The server's part of the CPU (apiserver with its etcd, scheduler,
	// controller-manager) and the kubelet's; the rest is the runtime's.
	procCPU := func() (server, kubeletCPU float64) {
		return benchutil.ProcStats(n.srv.Cmd.Process.Pid).CPUSeconds, benchutil.ProcStats(kubelet.Process.Pid).CPUSeconds
	}
	cpu0, byCmd0 := cpu(), cpuByCommand()
	server0, kubelet0 := procCPU()
	var cpuBurst time.Duration
	var serverBurst, kubeletBurst float64
	var byCmd string
	burst, err := startPods(ctx, client, &pods, "burst", 20, 20, func() {
		cpuBurst = cpu() - cpu0
		byCmd = cpuBreakdown(byCmd0, cpuByCommand(), cpuBurst, 20)
		server1, kubelet1 := procCPU()
		serverBurst, kubeletBurst = server1-server0, kubelet1-kubelet0
	})
	if err != nil {
		return r, err
	}
	settle()
	if os.Getenv("BENCH_VERBOSE") != "" {
		fmt.Println("burst latencies:", burst)
	}
	r.burst50, r.burst99, r.loadBurst = benchutil.Percentile(burst, 0.5), benchutil.Percentile(burst, 0.99), load1()
	fmt.Printf("burst of 20 created at once: p50 %v, p99 %v; %.0f ms CPU per pod (every process of the bench), of which mizzen server %.0f ms, kubelet %.0f ms (load average %s)\n",
		r.burst50.Round(time.Millisecond), r.burst99.Round(time.Millisecond),
		float64(cpuBurst.Milliseconds())/20, serverBurst*1000/20, kubeletBurst*1000/20, loadavg())
	fmt.Printf("  the burst's %s\n", byCmd)
	steady, err := startPods(ctx, client, &pods, "steady", 100, 10, func() {
		time.Sleep(10 * time.Second) // a status and relist period with every pod running
		p := benchutil.ProcStats(kubelet.Process.Pid)
		r.rss100, r.anon100 = p.RSSMiB, p.AnonMiB
		fmt.Printf("kubelet with 100 pods running: RSS %.0f MiB, private %.0f MiB\n", p.RSSMiB, p.AnonMiB)
	})
	if err != nil {
		return r, err
	}
	r.steady50, r.steady99, r.loadSteady = benchutil.Percentile(steady, 0.5), benchutil.Percentile(steady, 0.99), load1()
	_, kubelet1 := procCPU()
	r.kubeletCPU = kubelet1 - idle.CPUSeconds
	fmt.Printf("100 pods created 10 at a time: p50 %v, p99 %v (load average %s)\n",
		r.steady50.Round(time.Millisecond), r.steady99.Round(time.Millisecond), loadavg())
	fmt.Printf("kubelet CPU from Ready to the last pod gone: %.1f s\n", r.kubeletCPU)
	return r, nil
}

// gone reports whether the child pid has ended (a zombie not yet waited for).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return err != nil || i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// createdPods is the UIDs of the pods a run (or the floor) created, whose cgroups it
// removes at its end: runc never removes a pod's cgroup, and a kubelet's run stops the
// kubelet as soon as the last pods have left the API, before it has removed theirs; no
// later kubelet sweeps them (each run's kubelet has a root directory of its own). Left
// behind, a run's 100 pod cgroups in every hierarchy slow every later container start
// on the host (see docs/testing-with-containerd.md).
type createdPods struct {
	mu   sync.Mutex
	uids []types.UID
}

func (p *createdPods) add(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.uids = append(p.uids, uid)
}

// removeCgroups removes the pods' cgroups once their containers are gone.
func (p *createdPods) removeCgroups() {
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		fmt.Fprintln(os.Stderr, "removing the pods' cgroups:", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	left := 0
	for _, uid := range p.uids {
		if cgroups.RemovePod(uid) != nil {
			left++
		}
	}
	if left > 0 {
		fmt.Fprintf(os.Stderr, "%d pod cgroup(s) still busy, left on the host\n", left)
	}
}

// startPods creates n pods, at most concurrent at a time (each batch waits for the one
// before to be started), calls allRunning, deletes them, and returns each one's
// create-to-started latency.
func startPods(ctx context.Context, c *kubernetes.Clientset, pods *createdPods, prefix string, n, concurrent int, allRunning func()) ([]time.Duration, error) {
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
				made, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
					return
				}
				pods.add(made.UID)
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

// roundedList prints durations to the millisecond, in order.
func roundedList(d []time.Duration) string {
	out := make([]string, len(d))
	for i, v := range d {
		out[i] = v.Round(time.Millisecond).String()
	}
	return strings.Join(out, ", ")
}

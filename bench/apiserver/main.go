// Command apiserver benchmarks a real `mizzen server` process (embedded etcd and the
// apiserver, no other components) through client-go: time to /readyz, idle memory,
// pod creates/s with concurrent clients, gets/s, list latency of many pods, memory
// holding them, pod status writes/s (kubelet-like patches, controller-like updates),
// pod-bound service account tokens/s (the kubelet asks one for each pod it starts),
// and watch fan-out. With -upstream DIR it runs the same workload
// against upstream's etcd and kube-apiserver (binaries in DIR) in the same run,
// alternating (mizzen, upstream, mizzen, ...), and prints the medians and the
// mizzen/upstream ratios. It also measures the ceiling: the embedded etcd's own rate
// for the same writes, a client loop against the store alone.
//
// Build mizzen as `make build` does, without cgo: with cgo, kustomize's import of Go's
// plugin package makes the binary dynamic with every symbol exported, 39 MB larger and
// ~9 MiB more RSS (BENCHMARKS.md, mem19). For the memory figures add -cold-binaries:
// every server's binary then starts with none of its pages cached, so no side's
// file-backed RSS depends on how its binary was last written; take rates from a run
// without it (a cold kube-apiserver spends more CPU per create).
//
//	make build && go run ./bench/apiserver -upstream /tmp/upstream/bin
package main

import (
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	before := flag.String("mizzen-before", "", "path of an earlier mizzen binary, run as \"mizzen-before\" in every round too (a before/after pair in one alternating run)")
	upstream := flag.String("upstream", "", "directory of upstream's binaries (etcd, kube-apiserver); empty: mizzen only")
	serviceCIDR := flag.String("service-cluster-ip-range", "10.76.0.0/16", "upstream apiserver's service CIDR")
	rounds := flag.Int("rounds", 3, "runs of each, alternating")
	pods := flag.Int("pods", 10000, "pods to create")
	workers := flag.Int("workers", 50, "concurrent clients")
	watchers := flag.Int("watchers", 1000, "watchers for the fan-out figure")
	watchEvents := flag.Int("watch-events", 200, "changes made while the watchers watch")
	cold := flag.Bool("cold-binaries", false, "drop each server binary's pages from the page cache before starting it, so every server's file-backed RSS counts the pages it faulted in itself, whatever wrote the binary last (see benchutil.DropCachedPages); for the memory figures: a cold kube-apiserver spends more CPU per create, so take rates from a run without it")
	createsOnly := flag.Bool("creates-only", false, "measure start-up, idle RSS and the creates only, then stop the server: many quick rounds for an A/B of two builds' creates")
	ceiling := flag.Bool("ceiling", true, "also measure the embedded etcd alone with the same writes, once per round")
	cpuProfile := flag.String("cpuprofile", "", "instead: run mizzen's etcd and apiserver in this process and write a CPU profile of the creates (the clients included)")
	heapProfile := flag.String("heapprofile", "", "instead: run mizzen's etcd and apiserver in this process and write a heap profile where RSS holding the pods is measured (the clients' heap included)")
	getProfile := flag.String("get-cpuprofile", "", "instead: run mizzen's etcd and apiserver in this process and write a CPU profile of the gets (the clients included)")
	statusProfile := flag.String("status-cpuprofile", "", "instead: run mizzen's etcd and apiserver in this process and write a CPU profile of the pod status writes, patches and updates (the clients included)")
	listProfile := flag.String("list-cpuprofile", "", "instead: run mizzen's etcd and apiserver in this process and write a CPU profile of the lists whose body is discarded (the clients included)")
	tracePath := flag.String("trace", "", "instead: run mizzen's etcd and apiserver in this process and write an execution trace of the creates' first 2 seconds (`go tool trace -pprof=sync|syscall|sched FILE` says what they wait on)")
	allocProfile := flag.String("allocprofile", "", "instead: run mizzen's etcd and apiserver in this process and write the allocations profile as the creates start (FILE.before) and end (FILE): `go tool pprof -sample_index=alloc_space -diff_base FILE.before FILE` is the creates' (the clients' included)")
	flag.Parse()
	// client-go logs each get its deadline cuts short; the figures are the output.
	benchutil.QuietKlog()
	o := options{pods: *pods, workers: *workers, watchers: *watchers, watchEvents: *watchEvents, createsOnly: *createsOnly}
	if *cpuProfile != "" || *heapProfile != "" || *getProfile != "" || *listProfile != "" || *statusProfile != "" || *allocProfile != "" || *tracePath != "" {
		if err := profileInProcess(*cpuProfile, *getProfile, *listProfile, *statusProfile, *heapProfile, *allocProfile, *tracePath, o); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	for _, b := range []string{*bin, *before} {
		if b != "" && dynamicallyLinked(b) {
			fmt.Fprintf(os.Stderr, "warning: %s is dynamically linked (built with cgo); `make build` builds mizzen without cgo, 39 MB smaller and ~9 MiB less RSS\n", b)
		}
	}
	// startCold drops the binaries' cached pages (with -cold-binaries) and starts a cluster.
	startCold := func(start func() (benchutil.Cluster, error), binaries ...string) func() (benchutil.Cluster, error) {
		return func() (benchutil.Cluster, error) {
			if *cold {
				if err := benchutil.DropCachedPages(binaries...); err != nil {
					return nil, err
				}
			}
			return start()
		}
	}
	results := map[string][]figures{}
	var order []string
	for r := 0; r < *rounds; r++ {
		var starts []func() (benchutil.Cluster, error)
		if *before != "" {
			starts = append(starts, startCold(func() (benchutil.Cluster, error) {
				m, err := benchutil.StartMizzen(*before, benchutil.MizzenOnly...)
				if err != nil {
					return nil, err
				}
				m.Label = "mizzen-before"
				return m, nil
			}, *before))
		}
		starts = append(starts, startCold(func() (benchutil.Cluster, error) { return benchutil.StartMizzen(*bin, benchutil.MizzenOnly...) }, *bin))
		if *upstream != "" {
			starts = append(starts, startCold(func() (benchutil.Cluster, error) { return benchutil.StartUpstream(*upstream, *serviceCIDR) },
				filepath.Join(*upstream, "etcd"), filepath.Join(*upstream, "kube-apiserver")))
		}
		for _, start := range starts {
			t0 := time.Now()
			c, err := start()
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				os.Exit(1)
			}
			f, err := run(c, t0, o)
			name := c.Name()
			c.Stop()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
				os.Exit(1)
			}
			if results[name] == nil {
				order = append(order, name)
			}
			results[name] = append(results[name], f)
			fmt.Printf("round %d %s (load average %s):\n%s", r+1, name, loadAverage(), f)
		}
		if *ceiling {
			rate, p50, err := etcdCeiling(*pods, *workers, storedSize(results["mizzen"]))
			if err != nil {
				fmt.Fprintln(os.Stderr, "etcd ceiling:", err)
				os.Exit(1)
			}
			f := figures{}
			f.set("pod creates/s", rate)
			f.set("create p50 ms", p50)
			results["etcd alone"] = append(results["etcd alone"], f)
			if r == 0 {
				order = append(order, "etcd alone")
			}
			fmt.Printf("round %d embedded etcd alone, same writes, %d clients: %.0f/s (p50 %.1f ms)\n", r+1, *workers, rate, p50)
		}
	}
	report(order, results)
}

type options struct {
	pods, workers, watchers, watchEvents int
	createsOnly                          bool
	// profile, when set, is called to start (true) and stop (false) a profile of the creates.
	profile func(start bool)
	// profileGets, when set, is called to start (true) and stop (false) a profile of the gets.
	profileGets func(start bool)
	// profileLists, when set, is called to start (true) and stop (false) a profile of
	// the lists whose body is discarded.
	profileLists func(start bool)
	// profileStatus, when set, is called to start (true) and stop (false) a profile
	// of each kind of status write.
	profileStatus func(start bool)
	// holding, when set, is called where the RSS holding every pod is measured.
	holding func()
}

// figures are one run's measurements by name, in the order measured.
type figures struct {
	names  []string
	values map[string]float64
}

func (f *figures) set(name string, v float64) {
	if f.values == nil {
		f.values = map[string]float64{}
	}
	if _, ok := f.values[name]; !ok {
		f.names = append(f.names, name)
	}
	f.values[name] = v
}

func (f figures) String() string {
	var b strings.Builder
	for _, n := range f.names {
		fmt.Fprintf(&b, "  %-40s %10.1f\n", n, f.values[n])
	}
	return b.String()
}

// report prints each figure's median per cluster and mizzen/upstream.
func report(order []string, results map[string][]figures) {
	fmt.Printf("\nmedians (%d rounds):\n%-40s", len(results["mizzen"]), "figure")
	for _, name := range order {
		fmt.Printf(" %12s", name)
	}
	fmt.Printf(" %16s %16s\n", "mizzen/upstream", "mizzen/etcd")
	for _, fig := range results["mizzen"][0].names {
		fmt.Printf("%-40s", fig)
		med := map[string]float64{}
		for _, name := range order {
			var vs []float64
			for _, f := range results[name] {
				if v, ok := f.values[fig]; ok {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				fmt.Printf(" %12s", "-")
				continue
			}
			med[name] = benchutil.Median(vs)
			fmt.Printf(" %12.1f", med[name])
		}
		for _, other := range []string{"upstream", "etcd alone"} {
			if d, ok := med[other]; ok && d != 0 {
				fmt.Printf(" %16.2f", med["mizzen"]/d)
			} else {
				fmt.Printf(" %16s", "")
			}
		}
		fmt.Println()
	}
}

// loadAverage is the machine's one-minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(c benchutil.Cluster, start time.Time, o options) (figures, error) {
	var f figures
	nPods, workers := o.pods, o.workers
	f.set("start to /readyz ms", ms(time.Since(start)))
	time.Sleep(5 * time.Second)
	f.set("RSS idle MiB (apiserver+etcd)", benchutil.RSS(c.ServerPIDs()))
	f.set("RSS idle, anonymous MiB", benchutil.AnonRSS(c.ServerPIDs()))

	cfg := c.AdminConfig()
	cfg.QPS, cfg.Burst = -1, 0
	ctx := context.Background()
	newClient := func() *kubernetes.Clientset { return kubernetes.NewForConfigOrDie(rest.CopyConfig(cfg)) }
	client := newClient()
	// Pod creates pass ServiceAccount admission, as upstream's do: the namespaces need
	// the "default" account the controller-manager (not running here) would create.
	if err := ensureDefaultServiceAccount(ctx, client, "default"); err != nil {
		return f, err
	}

	// Creates: workers goroutines, as many client-go workers.
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	cpu0 := benchutil.CPU(c.ServerPIDs())
	self := []int{os.Getpid()}
	client0 := benchutil.CPU(self)
	if o.profile != nil {
		o.profile(true)
	}
	t0 := time.Now()
	var sizeOnce sync.Once
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
				created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w] = append(lat[w], time.Since(s))
				sizeOnce.Do(func() {
					if b, err := created.Marshal(); err == nil {
						f.set("created pod, protobuf bytes", float64(len(b)))
					}
				})
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if o.profile != nil {
		o.profile(false)
	}
	if n := failed.Load(); n > 0 {
		return f, fmt.Errorf("%d creates failed, the first: %v", n, firstErr.Load())
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	f.set("pod creates/s", float64(nPods)/elapsed.Seconds())
	f.set("create p50 ms", ms(benchutil.Percentile(all, 0.5)))
	f.set("create p99 ms", ms(benchutil.Percentile(all, 0.99)))
	f.set("server CPU µs per create", (benchutil.CPU(c.ServerPIDs())-cpu0)*1e6/float64(nPods))
	// The clients share the machine with the server: on a machine that is CPU-bound,
	// their cost per create caps the ratio of two servers' rates.
	if !slices.Contains(c.ServerPIDs(), self[0]) { // in-process (-cpuprofile), the server's CPU is this process's too
		f.set("benchmark's clients' CPU µs per create", (benchutil.CPU(self)-client0)*1e6/float64(nPods))
	}
	if o.createsOnly {
		return f, nil
	}

	// Gets.
	var gets atomic.Int64
	cpu0 = benchutil.CPU(c.ServerPIDs())
	if o.profileGets != nil {
		o.profileGets(true)
	}
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
	if o.profileGets != nil {
		o.profileGets(false)
	}
	f.set("pod gets/s", float64(gets.Load())/5)
	f.set("server CPU µs per get", (benchutil.CPU(c.ServerPIDs())-cpu0)*1e6/float64(max(gets.Load(), 1)))

	// Lists of every pod.
	for _, rv := range []string{"", "0"} {
		var ds []time.Duration
		for i := 0; i < 10; i++ {
			s := time.Now()
			list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				return f, err
			}
			ds = append(ds, time.Since(s))
			if len(list.Items) != nPods {
				return f, fmt.Errorf("list returned %d pods", len(list.Items))
			}
		}
		label := "consistent"
		if rv == "0" {
			label = "rv=0"
		}
		f.set(fmt.Sprintf("list %d pods, %s, protobuf, p50 ms", nPods, label), ms(benchutil.Percentile(ds, 0.5)))
	}
	// The server's part of a list: the body read and discarded, not decoded, so the
	// client's decoding (the same client-go on both sides) is left out.
	if o.profileLists != nil {
		o.profileLists(true)
	}
	for _, accept := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		ds, _, err := rawLists(cfg, "/api/v1/namespaces/default/pods", accept, "", 10)
		if err != nil {
			return f, err
		}
		label := "protobuf"
		if accept == "application/json" {
			label = "JSON"
		}
		f.set(fmt.Sprintf("list %d pods, consistent, %s, server time (body discarded), p50 ms", nPods, label), ms(benchutil.Percentile(ds, 0.5)))
		// Asked for explicitly, gzip is left to the caller: the body as it crossed the wire.
		_, zipped, err := rawLists(cfg, "/api/v1/namespaces/default/pods", accept, "gzip", 1)
		if err != nil {
			return f, err
		}
		f.set(fmt.Sprintf("list %d pods, %s, gzipped body KiB", nPods, label), float64(zipped)/1024)
	}
	// The same uncompressed: client-go (Go's transport) asks for gzip, which upstream
	// gives lists over 128 KiB and mizzen does not.
	plain, _, err := rawLists(cfg, "/api/v1/namespaces/default/pods", "application/vnd.kubernetes.protobuf", "identity", 10)
	if err != nil {
		return f, err
	}
	f.set(fmt.Sprintf("list %d pods, consistent, protobuf, Accept-Encoding: identity, server time, p50 ms", nPods), ms(benchutil.Percentile(plain, 0.5)))
	if o.profileLists != nil {
		o.profileLists(false)
	}
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = "application/json", "application/json"
	jsonClient := kubernetes.NewForConfigOrDie(jsonCfg)
	var ds []time.Duration
	for i := 0; i < 10; i++ {
		s := time.Now()
		if _, err := jsonClient.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
			return f, err
		}
		ds = append(ds, time.Since(s))
	}
	f.set(fmt.Sprintf("list %d pods, consistent, JSON, p50 ms", nPods), ms(benchutil.Percentile(ds, 0.5)))
	time.Sleep(2 * time.Second)
	f.set(fmt.Sprintf("RSS MiB holding %d pods", nPods), benchutil.RSS(c.ServerPIDs()))
	f.set(fmt.Sprintf("RSS holding %d pods, anonymous MiB", nPods), benchutil.AnonRSS(c.ServerPIDs()))
	if o.holding != nil {
		o.holding()
	}
	if err := statusWrites(ctx, c, client, nPods, workers, &f, o.profileStatus); err != nil {
		return f, err
	}
	if err := tokenRequests(ctx, c, client, nPods, workers, &f); err != nil {
		return f, err
	}
	if o.watchers <= 0 {
		return f, nil
	}
	nWatchers, nWatchEvents := o.watchers, o.watchEvents
	// Watch fan-out: nWatchers watch pods in a namespace; nWatchEvents changes; each event
	// carries its write time.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fanout"}}, metav1.CreateOptions{}); err != nil {
		return f, fmt.Errorf("creating namespace fanout: %w", err)
	}
	if err := ensureDefaultServiceAccount(ctx, client, "fanout"); err != nil {
		return f, err
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
			return f, err
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
	f.set(fmt.Sprintf("watch fan-out %dx%d, events/s", nWatchers, nWatchEvents), float64(delivered.Load())/fanout.Seconds())
	f.set("watch delay p99 ms", ms(benchutil.Percentile(dl, 0.99)))
	return f, nil
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

// rawLists GETs path n times with Accept accept (and Accept-Encoding encoding, unless
// empty: then Go's transport asks for gzip and decompresses) over the client's own TLS
// and credentials, reading each body to io.Discard, and returns the times from sending
// the request to the body's last byte, and the last body's size as received.
func rawLists(cfg *rest.Config, path, accept, encoding string, n int) ([]time.Duration, int64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, 0, err
	}
	defer hc.CloseIdleConnections()
	var ds []time.Duration
	var size int64
	for i := 0; i < n; i++ {
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Accept", accept)
		if encoding != "" {
			req.Header.Set("Accept-Encoding", encoding)
		}
		s := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return nil, 0, err
		}
		size, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, 0, err
		}
		ds = append(ds, time.Since(s))
		if resp.StatusCode != http.StatusOK || size == 0 {
			return nil, 0, fmt.Errorf("GET %s as %s: %s, %d bytes", path, accept, resp.Status, size)
		}
	}
	return ds, size, nil
}

// dynamicallyLinked reports whether the ELF binary at path asks for a dynamic loader:
// mizzen built with cgo is, and then exports every symbol (kustomize imports package
// plugin), which is not the binary `make build` makes.
func dynamicallyLinked(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".interp") != nil
}

// Command scheduler benchmarks `mizzen scheduler` end to end, in the manner of
// upstream's scheduler_perf but through a real apiserver on embedded etcd instead of an
// in-memory one: for each workload it starts a fresh control plane and a scheduler,
// creates the nodes and the initial pods (and waits until they are bound), then creates
// the measured pods and reports pods/s and the p50/p99 of each measured pod's latency
// from its create call to the moment a watch shows it bound. Afterwards it checks that
// no pod was bound twice and that no node holds more than its allocatable.
//
// mizzen runs as `mizzen server` (etcd and the apiserver) and `mizzen scheduler`
// processes; with -upstream DIR each workload also runs against upstream's etcd,
// kube-apiserver and kube-scheduler, alternating, with the same client qps, and the
// medians and ratios are printed. With -in-process, mizzen's etcd, apiserver and
// scheduler run in this process instead, with the creating clients and the watching
// informer, so that -cpuprofile profiles all of it.
//
// By default the measured pods are created while the scheduler runs, as upstream's
// scheduler_perf does (its SchedulingThroughput samples the pods scheduled per second
// while the creates go on): when the creating clients are slower than the scheduler,
// that measures the creates. With -queued the scheduler is stopped once the initial
// pods are bound, the measured pods are created, and a new scheduler is started:
// pods/s is then the scheduler's own rate, measured pods over the time from its start
// to the last measured pod seen bound (the rate after the first bind is printed too),
// the same way on both control planes, and CPU per pod covers the scheduler's start
// and the scheduling (binds, events, preemptions), not the creates.
//
//	go run ./bench/scheduler -workloads SchedulingBasic
//	go run ./bench/scheduler -workloads all -upstream /tmp/upstream/bin -rounds 3
//	go run ./bench/scheduler -workloads all -cpuprofile /tmp/sched.pprof   # in-process
//	go run ./bench/scheduler -workloads Preemption -queued -upstream /tmp/upstream/bin -rounds 2
//	go run ./bench/scheduler -queued -busy 4 -upstream /tmp/upstream/bin -rounds 2   # a busy machine
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"mizzen/bench/internal/benchutil"
)

func main() {
	names := flag.String("workloads", "SchedulingBasic", "comma-separated workloads, or all: "+strings.Join(workloadNames(), ", "))
	nodes := flag.Int("nodes", 0, "nodes (0: the workload's own)")
	initPods := flag.Int("init-pods", 0, "pods placed before measuring (0: the workload's own; -1: none)")
	measurePods := flag.Int("measure-pods", 0, "measured pods (0: the workload's own)")
	workers := flag.Int("create-workers", 32, "goroutines creating nodes and pods")
	qps := flag.Float64("scheduler-qps", 5000, "the scheduler's clientConnection.qps (and burst)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole process during the measured phase")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole process after the last workload")
	tracePath := flag.String("trace", "", "write an execution trace of 2 seconds of the measured phase, from 3 s after it starts (in-process; `go tool trace -pprof=sync|syscall|sched FILE` says what the scheduler waits on)")
	blockProfile := flag.String("blockprofile", "", "write a blocking profile (waits of 10µs and more) after the last workload")
	verbose := flag.Bool("v", false, "log the scheduler and apiserver at info level (in-process only)")
	bin := flag.String("mizzen", "_output/bin/mizzen", "the mizzen binary, for `mizzen server` and `mizzen scheduler` processes")
	upstream := flag.String("upstream", "", "directory of upstream's binaries: run each workload against upstream's etcd, kube-apiserver and kube-scheduler too, alternating")
	inProc := flag.Bool("in-process", false, "run mizzen's etcd, apiserver and scheduler in this process instead of `mizzen server` and `mizzen scheduler` processes (implied by the profile flags)")
	queued := flag.Bool("queued", false, "create the measured pods while no scheduler runs, then start one: measure the scheduler's own rate, not the creates")
	rounds := flag.Int("rounds", 1, "runs of each workload on each control plane, alternating")
	busy := flag.Int("busy", 0, "processes that each keep a core busy during every measured phase: the same busy machine for both control planes")
	serviceCIDR := flag.String("service-cluster-ip-range", "10.76.0.0/16", "upstream apiserver's service CIDR")
	flag.Parse()

	if *blockProfile != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	// A profile of this process says something of mizzen only when mizzen runs in it.
	if *cpuProfile != "" || *memProfile != "" || *blockProfile != "" || *tracePath != "" {
		*inProc = true
	}
	var selected []workload
	for _, name := range strings.Split(*names, ",") {
		for _, w := range workloads() {
			if name == "all" || name == w.name {
				selected = append(selected, w)
			}
		}
	}
	if len(selected) == 0 {
		fmt.Fprintf(os.Stderr, "no workload named %q; known: %s\n", *names, strings.Join(workloadNames(), ", "))
		os.Exit(2)
	}
	starts := []func() (cluster, error){func() (cluster, error) {
		if *inProc {
			return startInProcess(*verbose)
		}
		m, err := benchutil.StartMizzen(*bin, benchutil.MizzenOnly...)
		if err != nil {
			return nil, err
		}
		return processes{m}, nil
	}}
	if *upstream != "" {
		starts = append(starts, func() (cluster, error) {
			u, err := benchutil.StartUpstream(*upstream, *serviceCIDR)
			if err != nil {
				return nil, err
			}
			return processes{u}, nil
		})
	}
	var summary []string
	for i, w := range selected {
		if *nodes > 0 {
			w.nodes = *nodes
		}
		switch {
		case *initPods > 0:
			w.initPods = *initPods
		case *initPods < 0:
			w.initPods = 0
		}
		if *measurePods > 0 {
			w.measurePods = *measurePods
		}
		profile := ""
		if *cpuProfile != "" {
			profile = *cpuProfile
			if len(selected) > 1 {
				profile = fmt.Sprintf("%s.%d.%s", *cpuProfile, i, w.name)
			}
		}
		rates := map[string][]float64{}
		cpus := map[string][]float64{}
		var order []string
		for r := 0; r < *rounds; r++ {
			for _, start := range starts {
				res, err := run(w, runOptions{start: start, workers: *workers, qps: *qps, cpuProfile: profile, trace: *tracePath, verbose: *verbose, queued: *queued, busy: *busy})
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s: error: %v\n", w.name, err)
					os.Exit(1)
				}
				fmt.Println(res)
				if rates[res.cluster] == nil {
					order = append(order, res.cluster)
				}
				rates[res.cluster] = append(rates[res.cluster], res.podsPerSecond)
				cpus[res.cluster] = append(cpus[res.cluster], float64(res.cpu.Microseconds())/1000/float64(w.measurePods))
			}
		}
		line := fmt.Sprintf("%s (%d nodes, %d + %d pods, client qps %g), medians of %d:", w.name, w.nodes, w.initPods, w.measurePods, *qps, *rounds)
		for _, name := range order {
			line += fmt.Sprintf(" %s %.0f pods/s, %.2f ms CPU per pod;", name, benchutil.Median(rates[name]), benchutil.Median(cpus[name]))
		}
		if len(order) == 2 {
			line += fmt.Sprintf(" %s/%s pods/s %.2f, CPU per pod %.2f", order[0], order[1],
				benchutil.Median(rates[order[0]])/benchutil.Median(rates[order[1]]), benchutil.Median(cpus[order[0]])/benchutil.Median(cpus[order[1]]))
		}
		summary = append(summary, line)
	}
	fmt.Println()
	for _, l := range summary {
		fmt.Println(l)
	}
	for name, path := range map[string]string{"allocs": *memProfile, "block": *blockProfile} {
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err == nil {
			err = pprof.Lookup(name).WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, name, "profile:", err)
		}
	}
}

// workload is one scenario: its cluster shape and the pods it creates.
type workload struct {
	name                            string
	nodes, initPods, measurePods    int
	zones                           []string // topology.kubernetes.io/zone values, round robin over nodes
	initNamespace, measureNamespace string
	initPod, measurePod             func() *v1.Pod
	highPriorityClass               bool // create a PriorityClass "high" (value 10) first
	// ownedBy, when set, names a ReplicaSet created first in each namespace that selects
	// and owns every pod (as a Deployment's pods are), so that the scheduler's system
	// default topology spreading applies to them, as in the density run.
	ownedBy string
}

// Shapes follow upstream's scheduler_perf config (performance-config.yaml and its pod
// templates): nodes of 4 CPUs, 32Gi and 110 pods; pods of 100m and 500Mi.
func workloads() []workload {
	return []workload{
		{name: "SchedulingBasic", nodes: 5000, initPods: 1000, measurePods: 10000,
			initNamespace: "sched-0", measureNamespace: "sched-0", initPod: defaultPod, measurePod: defaultPod},
		{name: "TopologySpreading", nodes: 5000, initPods: 5000, measurePods: 2000, zones: []string{"moon-1", "moon-2", "moon-3"},
			initNamespace: "sched-0", measureNamespace: "sched-0", initPod: defaultPod, measurePod: spreadingPod},
		{name: "PodAntiAffinity", nodes: 5000, initPods: 1000, measurePods: 1000,
			initNamespace: "sched-0", measureNamespace: "sched-1", initPod: antiAffinityPod, measurePod: antiAffinityPod},
		{name: "OwnedPods", nodes: 1000, initPods: 20000, measurePods: 2000,
			initNamespace: "sched-0", measureNamespace: "sched-0", initPod: ownedPod, measurePod: ownedPod, ownedBy: "owner"},
		{name: "Preemption", nodes: 500, initPods: 2000, measurePods: 500,
			initNamespace: "sched-0", measureNamespace: "sched-0", initPod: lowPriorityPod, measurePod: highPriorityPod, highPriorityClass: true},
	}
}

func workloadNames() []string {
	var names []string
	for _, w := range workloads() {
		names = append(names, w.name)
	}
	return names
}

func podWithRequests(cpu string) *v1.Pod {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("500Mi")}
	return &v1.Pod{
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Ports:     []v1.ContainerPort{{ContainerPort: 80}},
			Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

func defaultPod() *v1.Pod { return podWithRequests("100m") }

// ownedPod is a Deployment's pod of bench/density: labelled, and owned (run sets the
// owner reference) by the workload's ReplicaSet.
func ownedPod() *v1.Pod {
	p := podWithRequests("100m")
	p.Labels = map[string]string{"app": "owned"}
	return p
}

func spreadingPod() *v1.Pod {
	p := podWithRequests("100m")
	p.Labels = map[string]string{"color": "blue"}
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 5, TopologyKey: v1.LabelTopologyZone,
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
	return p
}

func antiAffinityPod() *v1.Pod {
	p := podWithRequests("100m")
	p.Labels = map[string]string{"color": "green"}
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}},
		TopologyKey:   v1.LabelHostname, Namespaces: []string{"sched-0", "sched-1"}}}}}
	return p
}

func lowPriorityPod() *v1.Pod {
	p := podWithRequests("900m")
	zero := int64(0)
	p.Spec.TerminationGracePeriodSeconds = &zero
	return p
}

func highPriorityPod() *v1.Pod {
	p := podWithRequests("3000m")
	p.Spec.PriorityClassName = "high"
	return p
}

type runOptions struct {
	start      func() (cluster, error)
	workers    int
	qps        float64
	cpuProfile string
	trace      string
	verbose    bool
	queued     bool
	busy       int
}

type result struct {
	w                        workload
	cluster                  string
	setup, measured, creates time.Duration
	cpu                      time.Duration // process CPU time (user+system) in the measured phase
	loadBefore, loadAfter    string
	busy                     int // busy loops during the measured phase
	podsPerSecond            float64
	queued                   bool
	firstBound               time.Duration // -queued: from the scheduler's start to the first measured pod bound
	afterFirst               float64       // -queued: pods/s from the first measured pod bound to the last
	p50, p90, p99, max       time.Duration
	doubleBound, overCommits int
	preempted                int
}

func (r result) String() string {
	if r.queued {
		s := fmt.Sprintf("%s, %s (queued): %d nodes, %d initial pods (placed in %v), %d measured pods created in %v before the scheduler started; first bound after %v, all bound %v after the first: %.0f pods/s from the scheduler's start, %.0f after the first bound; time to bound from the scheduler's start p50 %v, p99 %v",
			r.cluster, r.w.name, r.w.nodes, r.w.initPods, r.setup.Round(time.Millisecond), r.w.measurePods, r.creates.Round(time.Millisecond),
			r.firstBound.Round(time.Millisecond), (r.measured - r.firstBound).Round(time.Millisecond), r.podsPerSecond, r.afterFirst,
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond))
		if r.w.highPriorityClass {
			s += fmt.Sprintf("; %d pods preempted", r.preempted)
		}
		s += fmt.Sprintf("; CPU %.2f ms per measured pod", float64(r.cpu.Microseconds())/1000/float64(r.w.measurePods))
		return s + fmt.Sprintf("; bound twice: %d; nodes over capacity: %d; load average %s before, %s after%s",
			r.doubleBound, r.overCommits, r.loadBefore, r.loadAfter, r.busyNote())
	}
	s := fmt.Sprintf("%s, %s: %d nodes, %d initial pods (placed in %v), %d measured pods bound in %v: %.0f pods/s; latency p50 %v, p90 %v, p99 %v, max %v",
		r.cluster, r.w.name, r.w.nodes, r.w.initPods, r.setup.Round(time.Millisecond), r.w.measurePods, r.measured.Round(time.Millisecond), r.podsPerSecond,
		r.p50.Round(time.Millisecond), r.p90.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond))
	if r.w.highPriorityClass {
		s += fmt.Sprintf("; %d pods preempted", r.preempted)
	}
	s += fmt.Sprintf("; CPU %.2f ms per measured pod", float64(r.cpu.Microseconds())/1000/float64(r.w.measurePods))
	return s + fmt.Sprintf("; creates took %v; bound twice: %d; nodes over capacity: %d; load average %s before, %s after%s",
		r.creates.Round(time.Millisecond), r.doubleBound, r.overCommits, r.loadBefore, r.loadAfter, r.busyNote())
}

func (r result) busyNote() string {
	if r.busy == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d busy loops)", r.busy)
}

func run(w workload, opts runOptions) (result, error) {
	res := result{w: w}
	c, err := opts.start()
	if err != nil {
		return res, err
	}
	defer c.Stop()
	res.cluster = c.Name()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cfg := c.AdminConfig()
	cfg.QPS, cfg.Burst = -1, 0
	client := kubernetes.NewForConfigOrDie(cfg)

	for _, ns := range []string{w.initNamespace, w.measureNamespace} {
		if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			continue
		}
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
		// ServiceAccount admission wants the namespace's default account, which no
		// controller-manager makes here.
		if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	if w.ownedBy != "" {
		initPod, measurePod, err := ownedTemplates(ctx, client, w)
		if err != nil {
			return res, err
		}
		w.initPod, w.measurePod = initPod, measurePod
	}
	if w.highPriorityClass {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 10}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}

	// The scheduler runs throughout, as in scheduler_perf: nodes arrive while it watches.
	if err := c.StartScheduler(opts.qps); err != nil {
		return res, err
	}

	tr := newTracker()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { tr.observe(obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj interface{}) { tr.observe(obj.(*v1.Pod)) },
		DeleteFunc: func(obj interface{}) { tr.deleted() },
	}); err != nil {
		return res, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	setupStart := time.Now()
	if err := parallel(opts.workers, w.nodes, func(i int) error { return createNode(ctx, client, w, i) }); err != nil {
		return res, fmt.Errorf("creating nodes: %w", err)
	}
	if err := createPods(ctx, client, tr, w.initNamespace, "init", w.initPod, w.initPods, opts.workers); err != nil {
		return res, fmt.Errorf("creating initial pods: %w", err)
	}
	if err := tr.waitBound(ctx, w.initNamespace, w.initPods, 10*time.Minute); err != nil {
		return res, fmt.Errorf("initial pods: %w", err)
	}
	res.setup = time.Since(setupStart)
	deletedBefore := tr.deletions.Load()
	res.queued = opts.queued
	createStart := time.Now()
	if opts.queued {
		c.StopScheduler()
		if err := createPods(ctx, client, tr, w.measureNamespace, "measured", w.measurePod, w.measurePods, opts.workers); err != nil {
			return res, fmt.Errorf("creating measured pods: %w", err)
		}
		res.creates = time.Since(createStart)
	}

	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			return res, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if opts.trace != "" {
		stopTrace, err := benchutil.TraceWindow(opts.trace, 3*time.Second, 2*time.Second)
		if err != nil {
			return res, err
		}
		defer stopTrace()
	}
	stopBusy, err := benchutil.Busy(opts.busy)
	if err != nil {
		return res, fmt.Errorf("starting the busy loops: %w", err)
	}
	defer stopBusy()
	res.busy = opts.busy
	res.loadBefore = loadAverage()
	cpuBefore := c.CPU()
	measureStart := time.Now()
	if opts.queued {
		if err := c.StartScheduler(opts.qps); err != nil {
			return res, err
		}
	} else {
		createStart = measureStart
		if err := createPods(ctx, client, tr, w.measureNamespace, "measured", w.measurePod, w.measurePods, opts.workers); err != nil {
			return res, fmt.Errorf("creating measured pods: %w", err)
		}
		res.creates = time.Since(measureStart)
	}
	want := w.measurePods
	if w.measureNamespace == w.initNamespace {
		want += w.initPods
	}
	if err := tr.waitBound(ctx, w.measureNamespace, want, 10*time.Minute); err != nil {
		return res, fmt.Errorf("measured pods: %w", err)
	}
	res.loadAfter = loadAverage()
	res.cpu = c.CPU() - cpuBefore
	stopBusy()
	if opts.cpuProfile != "" {
		pprof.StopCPUProfile()
	}

	origin := time.Time{} // each pod's own create call
	if opts.queued {
		origin = measureStart
	}
	lat, first, last := tr.latencies(w.measureNamespace, createStart, origin)
	if len(lat) < w.measurePods {
		return res, fmt.Errorf("only %d of %d measured pods bound", len(lat), w.measurePods)
	}
	res.measured = last.Sub(measureStart)
	res.podsPerSecond = float64(len(lat)) / res.measured.Seconds()
	if opts.queued {
		// pods/s counts from the scheduler's start (its informers' lists included, as
		// for a scheduler that takes over); the rate after the first bind leaves the
		// start out, but says nothing where the first binds wait for every pod's first
		// attempt (Preemption).
		res.firstBound = first.Sub(measureStart)
		res.afterFirst = float64(len(lat)-1) / last.Sub(first).Seconds()
	}
	res.p50, res.p90, res.p99 = benchutil.Percentile(lat, 0.50), benchutil.Percentile(lat, 0.90), benchutil.Percentile(lat, 0.99)
	res.max = lat[len(lat)-1] // sorted by Percentile
	res.preempted = int(tr.deletions.Load() - deletedBefore)
	res.doubleBound = int(tr.doubleBound.Load())
	res.overCommits, err = overCommittedNodes(ctx, client)
	return res, err
}

// ownedTemplates creates the ReplicaSet w.ownedBy in the workload's namespaces (no
// controller acts on it: its replicas are 0) and returns w's templates with it as
// each pod's controller.
func ownedTemplates(ctx context.Context, client kubernetes.Interface, w workload) (initPod, measurePod func() *v1.Pod, err error) {
	owners := map[string]metav1.OwnerReference{}
	for _, ns := range []string{w.initNamespace, w.measureNamespace} {
		if _, done := owners[ns]; done {
			continue
		}
		labels := ownedPod().Labels
		zero := int32(0)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: w.ownedBy}, Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: ownedPod().Spec},
		}}
		created, err := client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("creating the owning ReplicaSet: %w", err)
		}
		yes := true
		owners[ns] = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: created.Name, UID: created.UID, Controller: &yes}
	}
	owned := func(template func() *v1.Pod, ns string) func() *v1.Pod {
		return func() *v1.Pod {
			p := template()
			p.OwnerReferences = []metav1.OwnerReference{owners[ns]}
			return p
		}
	}
	return owned(w.initPod, w.initNamespace), owned(w.measurePod, w.measureNamespace), nil
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's one-minute load average: the figures mean little when
// other work competes for the cores.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func createNode(ctx context.Context, client kubernetes.Interface, w workload, i int) error {
	name := fmt.Sprintf("node-%05d", i)
	labels := map[string]string{v1.LabelHostname: name}
	if len(w.zones) > 0 {
		labels[v1.LabelTopologyZone] = w.zones[i%len(w.zones)]
	}
	n, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if n, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// Admission (TaintNodesByCondition, on both sides) taints a new node not-ready; the
	// node lifecycle controller, which does not run here, lifts it once the node is Ready.
	if len(n.Spec.Taints) > 0 {
		n.Spec.Taints = nil
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}
	return err
}

func createPods(ctx context.Context, client kubernetes.Interface, tr *tracker, ns, prefix string, template func() *v1.Pod, n, workers int) error {
	return parallel(workers, n, func(i int) error {
		p := template()
		p.Name = fmt.Sprintf("%s-%06d", prefix, i)
		tr.startCreate(ns + "/" + p.Name)
		_, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// tracker records, per pod, when its create call started and when a watch first showed
// it bound, and notices a pod whose node changes (bound twice).
type tracker struct {
	mu          sync.Mutex
	createdAt   map[string]time.Time
	boundAt     map[string]time.Time
	boundTo     map[types.UID]string
	boundPerNS  map[string]int
	doubleBound atomic.Int64
	deletions   atomic.Int64
}

func newTracker() *tracker {
	return &tracker{createdAt: map[string]time.Time{}, boundAt: map[string]time.Time{}, boundTo: map[types.UID]string{}, boundPerNS: map[string]int{}}
}

func (t *tracker) startCreate(key string) {
	now := time.Now()
	t.mu.Lock()
	t.createdAt[key] = now
	t.mu.Unlock()
}

func (t *tracker) observe(p *v1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	key := p.Namespace + "/" + p.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.boundTo[p.UID]; ok {
		if prev != p.Spec.NodeName {
			t.doubleBound.Add(1)
		}
		return
	}
	t.boundTo[p.UID] = p.Spec.NodeName
	t.boundAt[key] = now
	t.boundPerNS[p.Namespace]++
}

func (t *tracker) deleted() { t.deletions.Add(1) }

// waitBound polls until n pods of ns have been seen bound.
func (t *tracker) waitBound(ctx context.Context, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		bound := t.boundPerNS[ns]
		t.mu.Unlock()
		if bound >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods bound in %s after %v", bound, n, ns, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// latencies returns the latencies of pods in ns created after since, from origin (or,
// when origin is zero, from each pod's create call) to the moment it was seen bound,
// and when the first and the last of them were seen bound.
func (t *tracker) latencies(ns string, since, origin time.Time) ([]time.Duration, time.Time, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat []time.Duration
	var first, last time.Time
	for key, created := range t.createdAt {
		if !strings.HasPrefix(key, ns+"/") || created.Before(since) {
			continue
		}
		bound, ok := t.boundAt[key]
		if !ok {
			continue
		}
		from := created
		if !origin.IsZero() {
			from = origin
		}
		lat = append(lat, bound.Sub(from))
		if bound.After(last) {
			last = bound
		}
		if first.IsZero() || bound.Before(first) {
			first = bound
		}
	}
	return lat, first, last
}

// overCommittedNodes counts nodes whose bound, non-terminal pods request more CPU,
// memory or pod slots than the node's allocatable.
func overCommittedNodes(ctx context.Context, client kubernetes.Interface) (int, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	type usage struct{ cpu, mem, count int64 }
	used := map[string]*usage{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = &usage{}
			used[p.Spec.NodeName] = u
		}
		u.count++
		for _, c := range p.Spec.Containers {
			u.cpu += c.Resources.Requests.Cpu().MilliValue()
			u.mem += c.Resources.Requests.Memory().Value()
		}
	}
	over := 0
	for _, n := range nodes.Items {
		u := used[n.Name]
		if u == nil {
			continue
		}
		a := n.Status.Allocatable
		if u.cpu > a.Cpu().MilliValue() || u.mem > a.Memory().Value() || u.count > a.Pods().Value() {
			over++
		}
	}
	return over, nil
}

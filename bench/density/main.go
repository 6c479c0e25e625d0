// Command density is upstream's density test against mizzen: one `mizzen server`
// (etcd and the apiserver) with `mizzen scheduler` and `mizzen controller-manager`
// processes, and `mizzen hollow-nodes` as the N nodes (in -hollow-processes processes,
// each running its share with --first-index and --count); pods in Deployments of
// 100, 30 per node, asked for at a fixed rate (100 pods/s), then every Deployment
// deleted. It reports what upstream's scalability SLOs define: pod startup latency
// p50/p99 (creation to Running as a watch observes it), the p99 latency of API calls
// per resource, verb and scope from the apiserver's own histograms (upstream's SLI,
// apiserver_request_sli_duration_seconds, which leaves out waits for a priority
// level's seat; apiserver_request_duration_seconds beside it), scheduler throughput, apiserver+etcd CPU and memory, etcd's database
// size, and whether every pod reached Running, was bound once, and was deleted.
//
// With -upstream DIR the same run is made against upstream's etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager from DIR, with the same hollow nodes, so
// that only the control plane differs; -rounds alternates the two.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen
//	go run ./bench/density -nodes 100
//	go run ./bench/density -nodes 100 -upstream /work/upstream/bin -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
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
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/apimetrics"
	"mizzen/bench/internal/benchutil"
	"mizzen/internal/datadir"
	"mizzen/internal/testing/density"
	"mizzen/internal/testing/proc"
)

// controlPlane is a cluster whose controller-manager and etcd the run can see.
type controlPlane interface {
	benchutil.Cluster
	StartControllerManager(qps, burst int, clusterCIDR string) error
	ControllerManagerPID() int
	EtcdDB() string
}

type options struct {
	bin                     string
	nodes, podsPerNode      int
	maxPods, deploymentSize int
	rate                    float64
	schedulerQPS            float64
	cmQPS, cmBurst          int
	clusterCIDR             string
	timeout                 time.Duration
	progressEvery           time.Duration
	profileDir              string
	profileAfter            time.Duration
	hollowGOGC              int
	hollowGOMAXPROCS        int
	hollowProcesses         int
	nodeIdentity            bool
	recorderWindow          time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "mizzen", "_output/bin/mizzen", "the mizzen binary")
	flag.IntVar(&o.nodes, "nodes", 100, "hollow nodes (upstream's full run: 1000)")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 30, "pods per node: the run makes nodes × this many")
	flag.IntVar(&o.maxPods, "max-pods", 110, "each hollow node's pods capacity")
	flag.IntVar(&o.deploymentSize, "deployment-size", 100, "replicas of each Deployment")
	flag.Float64Var(&o.rate, "rate", 100, "pods asked for per second (Deployments are created at rate/size per second)")
	flag.Float64Var(&o.schedulerQPS, "scheduler-qps", 5000, "the scheduler's clientConnection qps and burst, both sides")
	flag.IntVar(&o.cmQPS, "controller-manager-qps", 500, "the controller-manager's --kube-api-qps, both sides")
	flag.IntVar(&o.cmBurst, "controller-manager-burst", 1000, "the controller-manager's --kube-api-burst, both sides")
	flag.StringVar(&o.clusterCIDR, "cluster-cidr", "10.240.0.0/14", "pod CIDRs of the nodes (/24 each) come from here")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up a run after this long; a run given up still reports how far it got")
	flag.DurationVar(&o.progressEvery, "progress", 30*time.Second, "print the pods' progress and each process's CPU this often from the first create (0: never)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write 30 s CPU profiles of the apiserver and the hollow nodes, each followed by their heap after a collection, here: -profile-after the first create, and 10 s into the deletion; and 10 s execution traces of both (after the -flight-recorder window) each time 400 pods are seen but not Running (up to 4)")
	flag.DurationVar(&o.recorderWindow, "flight-recorder", 0, "with -profile-dir, mizzen's server and the hollow nodes keep this long (e.g. 20s) of their execution trace (--flight-recorder-window) and the bench writes it out before each trace it takes on a lag, to show the stall's onset; off when 0, as tracing a process of 40,000 goroutines slows it (BENCHMARKS.md, session 28)")
	flag.DurationVar(&o.profileAfter, "profile-after", time.Minute, "when the first CPU profiles start, after the first create")
	flag.BoolVar(&o.nodeIdentity, "node-identity", true, "each hollow kubelet authenticates as its node (a client certificate of system:node:<name> from the cluster CA), as real kubelets do, so that the Node authorizer, NodeRestriction and priority and fairness see node traffic as such; false: all use the admin's credentials (exempt from priority and fairness), as runs before session 29 did")
	flag.IntVar(&o.hollowGOGC, "hollow-gogc", 400, "GOGC of the hollow-nodes process (0: Go's default). The hollow nodes stand for machines of their own; at Go's default their GC over a ~1 GB live heap takes ~0.2 of the two cores the control plane measured here needs")
	flag.IntVar(&o.hollowGOMAXPROCS, "hollow-gomaxprocs", 0, "GOMAXPROCS of the hollow-nodes processes (0: Go's default, the machine's cores). More than the cores gives their collections more workers and the processes a larger share of the cores against the control plane's")
	flag.IntVar(&o.hollowProcesses, "hollow-processes", 1, "hollow-nodes processes the nodes are shared between. Upstream's kubemark gives each hollow node a process of its own, on machines other than the control plane's; here they share the control plane's two cores, where ten processes of 100 nodes cost more CPU than one of 1,000 (BENCHMARKS.md, session 30)")
	upstream := flag.String("upstream", "", "directory of upstream's binaries: run upstream's control plane too, alternating")
	rounds := flag.Int("rounds", 1, "runs on each control plane, alternating")
	flag.Parse()

	if o.profileDir == "" {
		o.recorderWindow = 0
	}
	serverArgs := slices.Clone(benchutil.MizzenOnly)
	if o.recorderWindow > 0 {
		serverArgs = append(serverArgs, "--flight-recorder-window", o.recorderWindow.String())
	}
	starts := []func() (controlPlane, error){func() (controlPlane, error) {
		return benchutil.StartMizzen(o.bin, serverArgs...)
	}}
	if *upstream != "" {
		starts = append(starts, func() (controlPlane, error) { return benchutil.StartUpstream(*upstream, "10.96.0.0/12") })
	}
	results := map[string][]result{}
	var order []string
	failed := false
	for round := 0; round < *rounds; round++ {
		for _, start := range starts {
			r, err := runOnce(start, o)
			if err != nil {
				fmt.Fprintf(os.Stderr, "error (%s): %v\n", r.name, err)
				failed = true
			}
			r.print()
			if len(results[r.name]) == 0 {
				order = append(order, r.name)
			}
			results[r.name] = append(results[r.name], r)
		}
	}
	if len(order) > 1 || *rounds > 1 {
		summary(order, results)
	}
	if failed {
		os.Exit(1)
	}
}

// result is one run's figures.
type result struct {
	name                  string
	nodes, pods           int
	nodesReady            time.Duration // from the hollow nodes' start
	created               time.Duration // from the first Deployment to the last
	allRunning, deleted   time.Duration // from the first Deployment; from the deletes
	startup, startupWatch []time.Duration
	toBind                []time.Duration
	// stages splits each Running pod's startup at the times its status records (whole
	// seconds), with its whole startup: stageNames says where each stage starts and ends.
	stages               []podStartup
	firstCreated         time.Time // the earliest creationTimestamp of those pods
	throughput, peakRate float64   // pods bound per second: over the binding, in the best second
	serverCPU, allCPU    float64   // CPU seconds from the first create to the last deletion
	cmCPU                float64
	rssHolding, rssPeak  float64 // MiB, apiserver + etcd
	dbHolding, dbEnd     int64
	slos                 []apimetrics.SLOLine
	// slosCreating and slosDeleting are the p99s while the pods are created and Running,
	// and while they are deleted: where a run's misses are.
	slosCreating, slosDeleting []apimetrics.SLOLine
	// totalCreating and totalDeleting are the same with the waits for a priority
	// level's seat counted (apiserver_request_duration_seconds).
	totalCreating, totalDeleting []apimetrics.SLOLine
	// rejected are the requests priority and fairness turned away, "level/reason n".
	rejected      []string
	requests      []apimetrics.CallCount // apiserver_request_total between the scrapes, most first
	running, gone bool
	rebound, over []string
	load          string
	// unfinished says where a run that did not finish stopped; the figures are then
	// those of the pods that got that far, up to the moment it stopped.
	unfinished string
	counts     density.Counts
	stopped    time.Duration // from the first create
}

func runOnce(start func() (controlPlane, error), o options) (r result, err error) {
	r.nodes, r.pods = o.nodes, o.nodes*o.podsPerNode
	cp, err := start()
	if err != nil {
		return r, err
	}
	r.name = cp.Name()
	defer cp.Stop()
	if err := cp.StartScheduler(o.schedulerQPS); err != nil {
		return r, err
	}
	if err := cp.StartControllerManager(o.cmQPS, o.cmBurst, o.clusterCIDR); err != nil {
		return r, err
	}
	cfg := cp.AdminConfig()
	client := kubernetes.NewForConfigOrDie(cfg)
	// An interrupt (Ctrl-C, SIGTERM) ends the run as its timeout does: it reports how
	// far it got and stops everything it started.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	kubeconfig, err := adminKubeconfig(cp)
	if err != nil {
		return r, err
	}
	// The hollow nodes keep their pods' volumes under TMPDIR and remove them when they
	// stop; 1,000 nodes may not stop within the grace below, so the run gives them a
	// directory of its own and removes it itself (after the stop: defers run last first).
	hollowDir, err := os.MkdirTemp("", "density-hollow-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(hollowDir)
	var caDir string
	if o.nodeIdentity {
		if caDir, err = nodeCADir(cp); err != nil {
			return r, err
		}
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return r, err
		}
	}
	t0 := time.Now()
	hollows, hollowProfiles, err := startHollowNodes(o, kubeconfig, caDir, hollowDir)
	defer func() { // all at once: 1,000 nodes may take a while to stop
		var wg sync.WaitGroup
		for _, h := range hollows {
			wg.Go(func() { proc.Stop(h, 60*time.Second) })
		}
		wg.Wait()
	}()
	if err != nil {
		return r, err
	}
	hollowPIDs := make([]int, len(hollows))
	for i, h := range hollows {
		hollowPIDs[i] = h.Process.Pid
	}
	ready, lastPrint := 0, time.Now()
	if err := density.Wait(ctx, 15*time.Minute, func() bool {
		ready, _ = density.ReadyNodes(ctx, client)
		if o.progressEvery > 0 && time.Since(lastPrint) >= o.progressEvery {
			lastPrint = time.Now()
			fmt.Printf("[%5.0fs after the hollow nodes' start] %d of %d nodes Ready and untainted; load %s; hollow-nodes %.0f CPU s, RSS %.0f MiB\n",
				time.Since(t0).Seconds(), ready, o.nodes, loadAverage(), benchutil.CPU(hollowPIDs), benchutil.RSS(hollowPIDs))
		}
		return ready == o.nodes
	}, func() string { return fmt.Sprintf("%d of %d nodes Ready and untainted", ready, o.nodes) }); err != nil {
		return r, err
	}
	r.nodesReady = time.Since(t0)

	const ns = "density"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	// The ServiceAccount admission plugin refuses pods until the namespace's default
	// ServiceAccount exists.
	if err := density.Wait(ctx, 2*time.Minute, func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, func() string { return "no default ServiceAccount in " + ns }); err != nil {
		return r, err
	}
	tracker, err := density.Track(client, ns)
	if err != nil {
		return r, err
	}
	defer tracker.Stop()
	before, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return r, err
	}
	cpu0, allCPU0, cm0 := benchutil.CPU(cp.ServerPIDs()), benchutil.CPU(cp.PIDs()), benchutil.CPU([]int{cp.ControllerManagerPID()})
	stopSampling := sampleRSS(cp.ServerPIDs(), &r.rssPeak)
	defer stopSampling()
	r.load = loadAverage()

	t1 := time.Now()
	// A run that stops early (the timeout, an error) reports what it reached.
	defer func() {
		if err != nil {
			r.unfinish(err, tracker, t1, cp, before, cpu0, allCPU0, cm0)
		}
	}()
	procs := map[string][]int{"apiserver+etcd": cp.ServerPIDs(), "controller-manager": {cp.ControllerManagerPID()},
		"scheduler": others(cp.PIDs(), cp.ServerPIDs(), cp.ControllerManagerPID()), "hollow-nodes": hollowPIDs,
		"bench": {os.Getpid()}}
	stopProgress := reportProgress(o.progressEvery, t1, tracker, r.pods, procs)
	defer stopProgress()
	var profiles profiler
	defer profiles.wait()
	if o.profileDir != "" {
		profiles.ctx, profiles.dir, profiles.client, profiles.hollow = ctx, o.profileDir, client, hollowProfiles
		profiles.recorder = o.recorderWindow > 0
		stop := profiles.after(o.profileAfter, "creating")
		defer stop()
		stopLag := profiles.onLag(tracker, lagForTrace)
		defer stopLag()
	}
	if err := density.Deployments(ctx, client, ns, r.pods, o.deploymentSize, o.rate); err != nil {
		return r, err
	}
	r.created = time.Since(t1)
	progress := func() string { return fmt.Sprintf("%+v of %d pods", tracker.Counts(), r.pods) }
	if err := density.Wait(ctx, o.timeout, func() bool { return tracker.Counts().Running >= r.pods }, progress); err != nil {
		return r, fmt.Errorf("pods Running: %w", err)
	}
	r.allRunning = time.Since(t1)
	r.running = tracker.Counts().Live == r.pods
	time.Sleep(5 * time.Second) // the status writes after Running settle
	r.rssHolding = benchutil.RSS(cp.ServerPIDs())
	r.dbHolding = fileSize(cp.EtcdDB())
	if r.over, err = density.OverCapacity(ctx, client); err != nil {
		return r, err
	}

	middle, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return r, err
	}
	t2 := time.Now()
	if err := density.DeleteDeployments(ctx, client, ns); err != nil {
		return r, err
	}
	if o.profileDir != "" {
		stop := profiles.after(10*time.Second, "deleting")
		defer stop()
	}
	if err := density.Wait(ctx, o.timeout, func() bool { return tracker.Counts().Live == 0 }, progress); err != nil {
		return r, fmt.Errorf("pods deleted: %w", err)
	}
	r.deleted = time.Since(t2)
	left, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	r.gone = len(left.Items) == 0
	r.serverCPU = benchutil.CPU(cp.ServerPIDs()) - cpu0
	r.allCPU = benchutil.CPU(cp.PIDs()) - allCPU0
	r.cmCPU = benchutil.CPU([]int{cp.ControllerManagerPID()}) - cm0
	r.dbEnd = fileSize(cp.EtcdDB())
	after, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return r, err
	}
	r.slos = after.Latency.Since(before.Latency).SLOs()
	r.slosCreating, r.slosDeleting = middle.Latency.Since(before.Latency).SLOs(), after.Latency.Since(middle.Latency).SLOs()
	r.totalCreating, r.totalDeleting = middle.Total.Since(before.Total).SLOs(), after.Total.Since(middle.Total).SLOs()
	for k, v := range after.Rejected {
		if d := v - before.Rejected[k]; d > 0 {
			r.rejected = append(r.rejected, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	sort.Strings(r.rejected)
	r.requests = after.Requests.Since(before.Requests)
	pods := tracker.Pods()
	r.rebound = density.Rebound(pods)
	r.latencies(pods)
	if !r.running || !r.gone || len(r.rebound) > 0 || len(r.over) > 0 {
		return r, errors.New("the cluster did not do what it was asked: see the correctness lines")
	}
	return r, nil
}

// latencies fills the per-pod figures: startup from the pod's creationTimestamp (as
// upstream's measurement: whole seconds, so up to a second too long) and from the
// watch's first sight of it (the watcher's clock only), creation to binding, and the
// scheduler's binding rate.
func (r *result) latencies(pods []density.Pod) {
	var binds []time.Time
	for _, p := range pods {
		if p.Running.IsZero() {
			continue
		}
		r.startup = append(r.startup, p.Running.Sub(p.Created))
		r.startupWatch = append(r.startupWatch, p.Running.Sub(p.Seen))
		r.toBind = append(r.toBind, p.Bound.Sub(p.Seen))
		binds = append(binds, p.Bound)
		r.stages = append(r.stages, podStartup{created: p.Created, total: p.Running.Sub(p.Created), stages: podStages(p)})
		if r.firstCreated.IsZero() || p.Created.Before(r.firstCreated) {
			r.firstCreated = p.Created
		}
	}
	if len(binds) < 2 {
		return
	}
	sort.Slice(binds, func(i, j int) bool { return binds[i].Before(binds[j]) })
	if span := binds[len(binds)-1].Sub(binds[0]).Seconds(); span > 0 {
		r.throughput = float64(len(binds)) / span
	}
	perSecond := map[int64]int{}
	for _, b := range binds {
		perSecond[b.Unix()]++
	}
	for _, n := range perSecond {
		r.peakRate = max(r.peakRate, float64(n))
	}
}

// stageNames are the stages of a pod's startup podStages measures.
var stageNames = [...]string{
	"created to scheduled (PodScheduled condition)",
	"scheduled to its kubelet's first sync (status.startTime)",
	"first sync to the last container started (token, volumes, sandbox, containers)",
	"container started to Running seen by the watch",
}

// podStartup is one pod's startup and its stages.
type podStartup struct {
	created time.Time
	total   time.Duration
	stages  [len(stageNames)]time.Duration
}

// podStages splits p's startup at the times its status records. They are whole
// seconds (the watch's Running is not), so each stage is within a second of its
// real length; a time missing from the status (zero) makes its two stages zero.
func podStages(p density.Pod) [len(stageNames)]time.Duration {
	times := [...]time.Time{p.Created, p.Scheduled, p.KubeletStart, p.Started, p.Running}
	var out [len(stageNames)]time.Duration
	for i := range out {
		if !times[i].IsZero() && !times[i+1].IsZero() {
			out[i] = times[i+1].Sub(times[i])
		}
	}
	return out
}

// printStages prints each startup stage's p50 and p99 over all pods, and its median
// over the slowest 1% (the pods whose startup is at or above the p99): where the
// tail's time goes.
func (r result) printStages() {
	if len(r.stages) == 0 {
		return
	}
	p := benchutil.Percentile // sorts what it is given: each call gets a slice of its own
	totals := make([]time.Duration, len(r.stages))
	for i, s := range r.stages {
		totals[i] = s.total
	}
	p99 := p(totals, 0.99)
	var slow []podStartup
	for _, s := range r.stages {
		if s.total >= p99 {
			slow = append(slow, s)
		}
	}
	column := func(pods []podStartup, stage int) []time.Duration {
		out := make([]time.Duration, len(pods))
		for i, s := range pods {
			out[i] = s.stages[stage]
		}
		return out
	}
	fmt.Printf("pod startup by stage (times the pod's status records, whole seconds), p50 / p99 of all pods, median of the slowest %d:\n", len(slow))
	for i, name := range stageNames {
		all := column(r.stages, i)
		fmt.Printf("  %-80s %5.1f s / %5.1f s   slowest: %5.1f s\n", name,
			p(all, 0.5).Seconds(), p(all, 0.99).Seconds(), p(column(slow, i), 0.5).Seconds())
	}
	// When in the run the slowest were created: a tail made at the start (each node's
	// first pod) or under the load of the whole run.
	created := make([]time.Duration, len(slow))
	for i, s := range slow {
		created[i] = s.created.Sub(r.firstCreated)
	}
	fmt.Printf("  the slowest were created %.0f s (p10), %.0f s (p50), %.0f s (p90) after the first pod (created %s)\n",
		p(created, 0.1).Seconds(), p(created, 0.5).Seconds(), p(created, 0.9).Seconds(), r.firstCreated.UTC().Format(time.TimeOnly))
}

func (r result) print() {
	fmt.Printf("\n== %s: %d hollow nodes, %d pods (load average at start: %s)\n", r.name, r.nodes, r.pods, r.load)
	if r.nodesReady == 0 {
		return
	}
	p := benchutil.Percentile
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("nodes Ready and untainted %v after start\n", r.nodesReady.Round(time.Second))
	if r.unfinished != "" {
		fmt.Printf("NOT FINISHED: %s\n", r.unfinished)
		fmt.Printf("stopped %v after the first create: %d of %d pods seen created (%.1f/s), %d seen Running (%.1f/s), %d deleted; the figures below are those of the pods that got there\n",
			r.stopped.Round(time.Second), r.counts.Seen, r.pods, float64(r.counts.Seen)/r.stopped.Seconds(),
			r.counts.Running, float64(r.counts.Running)/r.stopped.Seconds(), r.counts.Deleted)
	} else if r.allRunning == 0 {
		return
	} else {
		fmt.Printf("Deployments created over %v; every pod Running %v after the first create\n", r.created.Round(time.Millisecond), r.allRunning.Round(time.Millisecond))
	}
	fmt.Printf("pod startup, creationTimestamp to Running seen by the watch: p50 %s p90 %s p99 %s (SLO p99 <= 5 s)\n",
		ms(p(r.startup, 0.5)), ms(p(r.startup, 0.9)), ms(p(r.startup, 0.99)))
	fmt.Printf("pod startup, watch sees the pod to watch sees it Running: p50 %s p90 %s p99 %s; of which to bound p50 %s p99 %s\n",
		ms(p(r.startupWatch, 0.5)), ms(p(r.startupWatch, 0.9)), ms(p(r.startupWatch, 0.99)), ms(p(r.toBind, 0.5)), ms(p(r.toBind, 0.99)))
	r.printStages()
	fmt.Printf("scheduler throughput: %.1f pods/s over the binding, %.0f in the best second\n", r.throughput, r.peakRate)
	if r.deleted > 0 {
		fmt.Printf("every pod deleted %v after the Deployments were\n", r.deleted.Round(time.Millisecond))
	}
	fmt.Printf("apiserver+etcd: %.1f CPU s from first create to last deletion (or the stop) (whole control plane %.1f, controller-manager %.1f); RSS %.0f MiB holding the pods, peak %.0f MiB\n",
		r.serverCPU, r.allCPU, r.cmCPU, r.rssHolding, r.rssPeak)
	fmt.Printf("etcd database: %.1f MiB holding the pods, %.1f MiB at the end\n", float64(r.dbHolding)/(1<<20), float64(r.dbEnd)/(1<<20))
	if r.unfinished != "" {
		fmt.Printf("correctness: not judged, the run did not finish; bound twice so far %d %v\n", len(r.rebound), r.rebound)
	} else {
		fmt.Printf("correctness: every pod Running %v, every pod deleted %v, bound twice %d %v, nodes over capacity %d %v\n",
			r.running, r.gone, len(r.rebound), r.rebound, len(r.over), r.over)
	}
	fmt.Printf("API call latency p99 (SLO: mutating and single reads 1 s, namespace lists 5 s, cluster lists 30 s), worst first:\n")
	for i, l := range r.slos {
		if i == 12 {
			fmt.Printf("  ... %d more calls, all within a smaller fraction of their SLO\n", len(r.slos)-i)
			break
		}
		verdict := "ok"
		if l.P99 > l.Call.Threshold() {
			verdict = "OVER SLO"
		}
		fmt.Printf("  %-48s p99 %7.3f s of %2.0f s  %6.0f calls  %s\n", l.Call, l.P99, l.Call.Threshold(), l.Count, verdict)
	}
	for _, phase := range []struct {
		name  string
		lines []apimetrics.SLOLine
	}{{"creating (first create to every pod Running)", r.slosCreating}, {"deleting (the Deployments' deletion to the last pod gone)", r.slosDeleting},
		{"creating, waits for a seat counted", r.totalCreating}, {"deleting, waits for a seat counted", r.totalDeleting}} {
		var over []string
		for _, l := range phase.lines {
			if l.P99 > l.Call.Threshold() {
				over = append(over, fmt.Sprintf("%s %.3f s (%.0f calls)", l.Call, l.P99, l.Count))
			}
		}
		if len(phase.lines) > 0 {
			fmt.Printf("  over SLO while %s: %d: %s\n", phase.name, len(over), strings.Join(over, "; "))
		}
	}
	fmt.Printf("turned away by priority and fairness (429, retried by the clients): %d kinds: %s\n", len(r.rejected), strings.Join(r.rejected, "; "))
	fmt.Printf("requests by call (apiserver_request_total, first create to last deletion or the stop), most first:\n")
	for i, c := range r.requests {
		if i == 40 {
			fmt.Printf("  ... %d more calls\n", len(r.requests)-i)
			break
		}
		fmt.Printf("  %-48s %7.0f  %5.2f per pod\n", c.Call, c.Count, c.Count/float64(r.pods))
	}
}

// summary prints the medians of every control plane's runs side by side.
func summary(order []string, results map[string][]result) {
	fmt.Printf("\n== medians of %d run(s) each\n", len(results[order[0]]))
	type figure struct {
		name string
		get  func(result) float64
	}
	p := func(f func(result) []time.Duration, q float64) func(result) float64 {
		return func(r result) float64 { return benchutil.Percentile(f(r), q).Seconds() }
	}
	figures := []figure{
		{"every pod Running after first create, s", func(r result) float64 { return r.allRunning.Seconds() }},
		{"pod startup p50 (creationTimestamp), s", p(func(r result) []time.Duration { return r.startup }, 0.5)},
		{"pod startup p99 (creationTimestamp), s", p(func(r result) []time.Duration { return r.startup }, 0.99)},
		{"pod startup p50 (watch to watch), s", p(func(r result) []time.Duration { return r.startupWatch }, 0.5)},
		{"pod startup p99 (watch to watch), s", p(func(r result) []time.Duration { return r.startupWatch }, 0.99)},
		{"scheduler pods/s", func(r result) float64 { return r.throughput }},
		{"all pods deleted, s", func(r result) float64 { return r.deleted.Seconds() }},
		{"apiserver+etcd CPU s", func(r result) float64 { return r.serverCPU }},
		{"control plane CPU s", func(r result) float64 { return r.allCPU }},
		{"controller-manager CPU s", func(r result) float64 { return r.cmCPU }},
		{"apiserver+etcd RSS holding pods, MiB", func(r result) float64 { return r.rssHolding }},
		{"apiserver+etcd RSS peak, MiB", func(r result) float64 { return r.rssPeak }},
		{"etcd db holding pods, MiB", func(r result) float64 { return float64(r.dbHolding) / (1 << 20) }},
		{"worst API call p99 / its SLO", func(r result) float64 {
			if len(r.slos) == 0 {
				return 0
			}
			return r.slos[0].P99 / r.slos[0].Call.Threshold()
		}},
	}
	fmt.Printf("%-40s", "figure")
	for _, name := range order {
		fmt.Printf(" %12s", name)
	}
	if len(order) == 2 {
		fmt.Printf(" %12s", order[0]+"/"+order[1])
	}
	fmt.Println()
	for _, f := range figures {
		fmt.Printf("%-40s", f.name)
		var medians []float64
		for _, name := range order {
			var vals []float64
			for _, r := range results[name] {
				if r.allRunning > 0 {
					vals = append(vals, f.get(r))
				}
			}
			m := benchutil.Median(vals)
			medians = append(medians, m)
			fmt.Printf(" %12.2f", m)
		}
		if len(medians) == 2 && medians[1] != 0 {
			fmt.Printf(" %12.2f", medians[0]/medians[1])
		}
		fmt.Println()
	}
}

// startHollowNodes starts o.nodes hollow nodes in o.hollowProcesses processes of
// (nearly) equal shares, each with its log in dir, and returns them and the first
// process's profiling address (empty without o.profileDir): the profiles and traces
// are that process's, a sample of the hollow nodes. On an error it returns the
// processes already started, for the caller to stop.
func startHollowNodes(o options, kubeconfig, caDir, dir string) ([]*exec.Cmd, string, error) {
	var started []*exec.Cmd
	profiles := ""
	processes := max(1, min(o.hollowProcesses, o.nodes))
	for p := range processes {
		first, next := o.nodes*p/processes, o.nodes*(p+1)/processes
		cmd := exec.Command(o.bin, "hollow-nodes", "--kubeconfig", kubeconfig,
			"--first-index", strconv.Itoa(first), "--count", strconv.Itoa(next-first),
			"--max-pods", strconv.Itoa(o.maxPods), "--preloaded-images", density.Image)
		if caDir != "" {
			cmd.Args = append(cmd.Args, "--node-ca-dir", caDir)
		}
		if o.profileDir != "" && p == 0 {
			profiles = fmt.Sprintf("127.0.0.1:%d", benchutil.FreePort())
			cmd.Args = append(cmd.Args, "--profiling-address", profiles)
			if o.recorderWindow > 0 {
				cmd.Args = append(cmd.Args, "--flight-recorder-window", o.recorderWindow.String())
			}
		}
		cmd.Env = append(os.Environ(), "TMPDIR="+dir)
		if o.hollowGOGC > 0 {
			cmd.Env = append(cmd.Env, "GOGC="+strconv.Itoa(o.hollowGOGC))
		}
		if o.hollowGOMAXPROCS > 0 {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(o.hollowGOMAXPROCS))
		}
		logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("hollow-nodes-%d.log", p)))
		if err != nil {
			return started, "", err
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		benchutil.DieWithParent(cmd)
		err = cmd.Start()
		logFile.Close() // the child has its own descriptor
		if err != nil {
			return started, "", err
		}
		started = append(started, cmd)
	}
	return started, profiles, nil
}

// adminKubeconfig is the cluster's admin kubeconfig file, for the hollow nodes.
func adminKubeconfig(cp controlPlane) (string, error) {
	switch c := cp.(type) {
	case *benchutil.Mizzen:
		return c.Kubeconfig, nil
	case *benchutil.Upstream:
		return c.Kubeconfig, nil
	}
	return "", fmt.Errorf("no kubeconfig for %s", cp.Name())
}

// nodeCADir is where the control plane keeps the CA its apiserver trusts for client
// certificates, which the hollow nodes issue their own from.
func nodeCADir(cp controlPlane) (string, error) {
	switch c := cp.(type) {
	case *benchutil.Mizzen:
		return datadir.Dir(c.Dir).TLS(), nil
	case *benchutil.Upstream:
		return filepath.Join(c.Dir, "pki"), nil
	}
	return "", fmt.Errorf("no CA for %s", cp.Name())
}

// sampleRSS keeps the largest resident memory of pids seen, every second, until the
// returned function is called.
func sampleRSS(pids []int, peak *float64) func() {
	var mu sync.Mutex
	return inBackground(func(done <-chan struct{}) {
		for {
			rss := benchutil.RSS(pids)
			mu.Lock()
			*peak = max(*peak, rss)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
		}
	})
}

// inBackground runs loop in a goroutine until the returned function, which may be
// called more than once, closes loop's done channel and waits for it to return.
func inBackground(loop func(done <-chan struct{})) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		loop(done)
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		wg.Wait()
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// unfinish fills what a run that stopped early (err) reached: the pods' counts and the
// latencies of those that got that far, the CPU spent, and the API calls' latencies,
// from a scrape made now (with a context of its own: the run's may be what ended).
func (r *result) unfinish(err error, tracker *density.Tracker, t1 time.Time, cp controlPlane, before apimetrics.Metrics, cpu0, allCPU0, cm0 float64) {
	r.unfinished = err.Error()
	r.stopped = time.Since(t1)
	r.counts = tracker.Counts()
	pods := tracker.Pods()
	r.rebound = density.Rebound(pods)
	r.latencies(pods)
	r.serverCPU = benchutil.CPU(cp.ServerPIDs()) - cpu0
	r.allCPU = benchutil.CPU(cp.PIDs()) - allCPU0
	r.cmCPU = benchutil.CPU([]int{cp.ControllerManagerPID()}) - cm0
	r.rssHolding = benchutil.RSS(cp.ServerPIDs())
	r.dbHolding = fileSize(cp.EtcdDB())
	r.dbEnd = r.dbHolding
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if after, err := apimetrics.Scrape(ctx, kubernetes.NewForConfigOrDie(cp.AdminConfig())); err == nil {
		r.slos = after.Latency.Since(before.Latency).SLOs()
		r.requests = after.Requests.Since(before.Requests)
	} else {
		fmt.Fprintf(os.Stderr, "scraping the metrics after the stop: %v\n", err)
	}
}

// others are pids without those of exclude and without pid.
func others(pids, exclude []int, pid int) []int {
	var out []int
	for _, p := range pids {
		if p != pid && !slices.Contains(exclude, p) {
			out = append(out, p)
		}
	}
	return out
}

// reportProgress prints, every interval from t0 until the returned function is called,
// where the pods are and how much CPU each group of processes took in the interval
// (as pidstat would), with the load average.
func reportProgress(interval time.Duration, t0 time.Time, tracker *density.Tracker, total int, procs map[string][]int) func() {
	if interval <= 0 {
		return func() {}
	}
	names := make([]string, 0, len(procs))
	for name := range procs {
		names = append(names, name)
	}
	sort.Strings(names)
	return inBackground(func(done <-chan struct{}) {
		last, lastAt := map[string]float64{}, time.Now()
		for _, name := range names {
			last[name] = benchutil.CPU(procs[name])
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			c := tracker.Counts()
			now := time.Now()
			var cpu []string
			for _, name := range names {
				v := benchutil.CPU(procs[name])
				cpu = append(cpu, fmt.Sprintf("%s %.2f", name, (v-last[name])/now.Sub(lastAt).Seconds()))
				last[name] = v
			}
			lastAt = now
			fmt.Printf("[%5.0fs] pods of %d: seen %d, Running %d, deleted %d, live %d; load %s; CPU cores used: %s; RSS MiB: apiserver+etcd %.0f, hollow-nodes %.0f\n",
				now.Sub(t0).Seconds(), total, c.Seen, c.Running, c.Deleted, c.Live, loadAverage(), strings.Join(cpu, ", "),
				benchutil.RSS(procs["apiserver+etcd"]), benchutil.RSS(procs["hollow-nodes"]))
		}
	})
}

// profiler takes 30-second CPU profiles of the apiserver (its /debug/pprof, as the
// admin) and of the hollow nodes (their --profiling-address) at the same time, each
// followed by a heap profile.
type profiler struct {
	ctx    context.Context
	dir    string
	client kubernetes.Interface
	hollow string // host:port, empty for none
	// recorder says the processes keep a flight recorder's window, which onLag
	// writes out before its trace (upstream's apiserver answers 404).
	recorder bool
	wg       sync.WaitGroup
	busy     sync.Mutex // one set of profiles at a time: a process profiles once at a time
}

// after starts the profiles named label after d; the returned function cancels them if
// they have not started.
func (p *profiler) after(d time.Duration, label string) func() {
	p.wg.Add(1)
	t := time.AfterFunc(d, func() {
		defer p.wg.Done()
		p.busy.Lock()
		defer p.busy.Unlock()
		p.fetch("profile", "seconds", "30", label+".pprof")
		// The live heap after a collection: what the processes hold per pod; then the
		// runtime's exact counts beside the profile's sampled ones.
		p.fetch("heap", "gc", "1", label+"-heap.pprof")
		p.fetch("heap", "debug", "1", label+"-heap.txt")
		for _, process := range []string{"apiserver", "hollow-nodes"} {
			if data, err := os.ReadFile(filepath.Join(p.dir, process+"-"+label+"-heap.txt")); err == nil {
				fmt.Printf("%s heap (%s): %s\n", process, label, heapSummary(data))
			}
		}
	})
	return func() {
		if t.Stop() {
			p.wg.Done()
		}
	}
}

// fetch gets the profile (/debug/pprof/<profile>, with ?<param>=<value> unless param
// is empty) of the apiserver, as the admin, and of the hollow nodes at the same time,
// and writes each to "apiserver-"+suffix and "hollow-nodes-"+suffix.
func (p *profiler) fetch(profile, param, value, suffix string) {
	query := ""
	if param != "" {
		query = "?" + param + "=" + value
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		req := p.client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/" + profile)
		if param != "" {
			req = req.Param(param, value)
		}
		data, err := req.DoRaw(p.ctx)
		p.write("apiserver-"+suffix, data, err)
	}()
	go func() {
		defer wg.Done()
		if p.hollow != "" {
			data, err := httpGet(p.ctx, "http://"+p.hollow+"/debug/pprof/"+profile+query)
			p.write("hollow-nodes-"+suffix, data, err)
		}
	}()
	wg.Wait()
}

// heapSummary is the runtime's own figures from a heap profile in text form
// (?debug=1): live objects and bytes, stacks, and collections so far.
func heapSummary(text []byte) string {
	fields := map[string]string{}
	for line := range strings.Lines(string(text)) {
		if name, value, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "# "), " = "); ok {
			fields[name] = value
		}
	}
	mib := func(name string) string {
		inUse, _, _ := strings.Cut(fields[name], " ") // "Stack = in use / from the OS"
		n, err := strconv.ParseUint(inUse, 10, 64)
		if err != nil {
			return "?"
		}
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%s objects, %s allocated, stacks %s, %s collections",
		fields["HeapObjects"], mib("HeapAlloc"), mib("Stack"), fields["NumGC"])
}

func (p *profiler) write(name string, data []byte, err error) {
	if err == nil {
		err = os.WriteFile(filepath.Join(p.dir, name), data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	fmt.Printf("(profile written: %s)\n", filepath.Join(p.dir, name))
}

// wait waits for the profiles under way.
func (p *profiler) wait() { p.wg.Wait() }

// lagForTrace is how many pods seen but not yet Running make onLag trace the processes:
// at 100 pods/s a run that keeps up has one or two hundred in flight, and each run's
// startup tail so far was one stall of several seconds (BENCHMARKS.md, sessions 26–27).
const lagForTrace = 400

// maxLagTraces bounds the traces onLag takes in a run.
const maxLagTraces = 4

// onLag takes a 10-second execution trace of the apiserver (with its etcd) and of the
// hollow nodes each time the pods seen but not Running reach lag, up to maxLagTraces
// times, once they have fallen below half of lag in between: what the goroutines waited
// on (the CPU, the network, a GC), at what moment, during a stall; with a flight
// recorder, first the window before that moment, where the stall began. Tracing costs
// the processes some CPU while it runs. The returned function stops it.
func (p *profiler) onLag(tracker *density.Tracker, lag int) func() {
	return inBackground(func(done <-chan struct{}) {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		armed, taken := true, 0
		for taken < maxLagTraces {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			c := tracker.Counts()
			inFlight := c.Seen - c.Running
			if !armed {
				armed = inFlight < lag/2
				continue
			}
			if inFlight < lag {
				continue
			}
			at := time.Now().UTC().Format("150405")
			fmt.Printf("(%d pods seen but not Running at %s UTC: tracing for 10 s)\n", inFlight, at)
			p.busy.Lock()
			if p.recorder {
				p.fetch("flightrecorder", "", "", "flight-"+at+".out")
			}
			p.fetch("trace", "seconds", "10", "trace-"+at+".out")
			p.busy.Unlock()
			armed, taken = false, taken+1
		}
	})
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

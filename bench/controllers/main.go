// Command controllers benchmarks the controller-manager as its own process against a
// real control plane without a scheduler or kubelets: it creates many Deployments at
// once and measures the time until every ReplicaSet reports all its replicas (every
// pod created; none is bound, nothing runs them), and the controller-manager's CPU
// seconds and memory for it. Memory is reported as RSS and split into its anonymous
// part (heap, stacks: what the controller-manager itself holds) and its file-backed
// part (the mapped binary's pages).
//
// mizzen is `mizzen server` (etcd and the apiserver only) with `mizzen
// controller-manager`; with -upstream DIR the same load also runs against upstream's
// etcd, kube-apiserver and kube-controller-manager, alternating, with the same client
// qps and burst on both, and the medians and ratios are printed. -mizzen-before BIN
// runs an earlier build in every round too, for a before/after pair. -floor runs, in
// every round too, mizzen's server with a client that makes only the
// controller-manager's calls (floor.go), and prints each controller-manager's CPU as
// a multiple of that floor's.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/controllers
//	go run ./bench/controllers -upstream /work/upstream/bin -rounds 3
//	go build -o /tmp/bcm ./bench/controllers && /tmp/bcm -upstream /work/upstream/bin -floor -rounds 3
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/bench/internal/apimetrics"
	"mizzen/bench/internal/benchutil"
)

// controlPlane is a cluster with a controller-manager the benchmark starts and watches.
type controlPlane interface {
	benchutil.Cluster
	StartControllerManager(qps, burst int, clusterCIDR string) error
	ControllerManagerPID() int
}

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	deployments := flag.Int("deployments", 1000, "deployments to create")
	replicas := flag.Int("replicas", 10, "replicas of each")
	qps := flag.Int("kube-api-qps", 1000, "the controller-manager's client limit (burst twice it), both sides")
	heapProfile := flag.String("heap-profile", "", "write mizzen's controller-manager's heap profile after the load to this file")
	cpuProfile := flag.String("cpu-profile", "", "write mizzen's controller-manager's CPU profile of the load's first -cpu-profile-seconds to this file")
	cpuProfileSeconds := flag.Int("cpu-profile-seconds", 20, "length of the -cpu-profile, from the first create")
	upstream := flag.String("upstream", "", "directory of upstream's binaries: run upstream's control plane and kube-controller-manager too, alternating")
	rounds := flag.Int("rounds", 1, "runs on each control plane, alternating")
	before := flag.String("mizzen-before", "", "path of an earlier mizzen binary, run as \"mizzen-before\" in every round too (a before/after pair in one alternating run)")
	floor := flag.Bool("floor", false, "run the floor in every round too: mizzen's server with, in place of a controller-manager, a client that only makes the controller-manager's calls (floor.go)")
	floorClient := flag.String("floor-client", "", "be the floor's client, with this admin kubeconfig (the benchmark starts it)")
	flag.Parse()
	if *floorClient != "" {
		if err := runFloorClient(*floorClient, *qps); err != nil {
			fmt.Fprintln(os.Stderr, "floor client:", err)
			os.Exit(1)
		}
		return
	}
	profilePort := benchutil.FreePort()
	var mizzenAdmin *rest.Config // presented to the controller-manager for its heap profile
	starts := []func() (controlPlane, error){func() (controlPlane, error) {
		m, err := benchutil.StartMizzen(*bin, benchutil.MizzenOnly...)
		if err == nil && (*heapProfile != "" || *cpuProfile != "") {
			mizzenAdmin = m.AdminConfig()
			m.ControllerManagerArgs = []string{"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(profilePort), "--profiling"}
		}
		return m, err
	}}
	if *before != "" {
		starts = append(starts, func() (controlPlane, error) {
			m, err := benchutil.StartMizzen(*before, benchutil.MizzenOnly...)
			if err == nil {
				m.Label = "mizzen-before"
			}
			return m, err
		})
	}
	if *upstream != "" {
		starts = append(starts, func() (controlPlane, error) { return benchutil.StartUpstream(*upstream, "10.96.0.0/12") })
	}
	if *floor {
		starts = append(starts, func() (controlPlane, error) {
			m, err := benchutil.StartMizzen(*bin, benchutil.MizzenOnly...)
			if err != nil {
				return nil, err
			}
			return &floorPlane{Mizzen: m}, nil
		})
	}
	results := map[string][]result{}
	var order []string
	for round := 0; round < *rounds; round++ {
		for _, start := range starts {
			var profiled chan error
			starting := func(name string) {
				if *cpuProfile != "" && name == "mizzen" && profiled == nil {
					profiled = make(chan error, 1)
					go func() {
						profiled <- fetchProfile(profilePort, mizzenAdmin, fmt.Sprintf("profile?seconds=%d", *cpuProfileSeconds), *cpuProfile)
					}()
				}
			}
			r, err := run(start, *deployments, int32(*replicas), *qps, starting, func(name string) {
				if *heapProfile != "" && name == "mizzen" {
					if err := fetchProfile(profilePort, mizzenAdmin, "heap", *heapProfile); err != nil {
						fmt.Fprintln(os.Stderr, "heap profile:", err)
					}
				}
				if profiled != nil {
					if err := <-profiled; err != nil {
						fmt.Fprintln(os.Stderr, "CPU profile:", err)
					}
				}
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				os.Exit(1)
			}
			if len(results[r.name]) == 0 {
				order = append(order, r.name)
			}
			results[r.name] = append(results[r.name], r)
		}
	}
	med := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return benchutil.Median(v)
	}
	// Each other control plane against the first (mizzen), as ratios of medians.
	for _, other := range order[1:] {
		a, b := results[order[0]], results[other]
		fmt.Printf("\nmedians of %d run(s): %-10s %-10s ratio (%s/%s)\n", len(a), order[0], other, other, order[0])
		for _, f := range []struct {
			name string
			get  func(result) float64
		}{
			{"time to every ReplicaSet full, s", func(r result) float64 { return r.elapsed.Seconds() }},
			{"controller-manager CPU s", func(r result) float64 { return r.cpu }},
			{"controller-manager RSS after, MiB", func(r result) float64 { return r.rss }},
		} {
			ma, mb := med(a, f.get), med(b, f.get)
			fmt.Printf("%-36s %10.2f %10.2f %6.2fx\n", f.name, ma, mb, mb/ma)
		}
	}
	// Each controller-manager's CPU as a multiple of the floor's: what is left to its
	// own logic and bookkeeping above the calls.
	if fl := results["floor"]; len(fl) > 0 {
		cpu := func(r result) float64 { return r.cpu }
		fmt.Printf("\ncontroller-manager CPU against the floor (%.2f s, medians):\n", med(fl, cpu))
		for _, name := range order {
			if name != "floor" {
				fmt.Printf("  %-14s %6.2f s %6.2fx\n", name, med(results[name], cpu), med(results[name], cpu)/med(fl, cpu))
			}
		}
	}
}

// result is one run's figures.
type result struct {
	name     string
	elapsed  time.Duration
	cpu, rss float64
}

// fetchProfile saves the controller-manager's pprof profile (self-signed HTTPS) named
// by what ("heap", "profile?seconds=N"), presenting the admin's client certificate
// (system:masters, always authorized).
func fetchProfile(port int, admin *rest.Config, what, path string) error {
	tc, err := rest.TLSConfigFor(admin)
	if err != nil {
		return err
	}
	if tc == nil {
		tc = &tls.Config{}
	}
	tc.RootCAs, tc.InsecureSkipVerify = nil, true
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{TLSClientConfig: tc}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/%s", port, what))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, body)
	}
	return os.WriteFile(path, body, 0o644)
}

// run makes one run; starting is called with the cluster's name just before the first
// create, loaded after the load, while the controller-manager still runs.
func run(start func() (controlPlane, error), nDeploy int, replicas int32, qps int, starting, loaded func(name string)) (result, error) {
	cp, err := start()
	if err != nil {
		return result{}, err
	}
	defer cp.Stop()
	r := result{name: cp.Name()}
	client := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	if err := cp.StartControllerManager(qps, 2*qps, ""); err != nil {
		return r, err
	}
	cm := cp.ControllerManagerPID()
	ctx := context.Background()
	// The default ServiceAccount (the controller-manager makes it) lets pods in.
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Since(start) > 2*time.Minute {
			return r, fmt.Errorf("%s: no default ServiceAccount after 2 minutes", r.name)
		}
	}
	time.Sleep(10 * time.Second)
	idle := benchutil.ProcStats(cm)
	fmt.Printf("\n== %s\ncontroller-manager idle: %s\n", r.name, idle.Memory())

	before, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return r, err
	}
	starting(r.name)
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= nDeploy {
					return
				}
				labels := map[string]string{"app": fmt.Sprintf("d%d", i)}
				d := &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d%04d", i)},
					Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}},
				}
				if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
				}
			}
		}()
	}
	wg.Wait()
	created := time.Since(t0)
	var peakRSS float64
	for {
		if p := benchutil.ProcStats(cm); p.RSSMiB > peakRSS {
			peakRSS = p.RSSMiB
		}
		list, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return r, err
		}
		done := 0
		for _, rs := range list.Items {
			if rs.Status.Replicas == replicas {
				done++
			}
		}
		if done == nDeploy {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return r, fmt.Errorf("%s: only %d of %d ReplicaSets full after 10 minutes", r.name, done, nDeploy)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.elapsed = time.Since(t0)
	after := benchutil.ProcStats(cm)
	r.cpu, r.rss = after.CPUSeconds-idle.CPUSeconds, after.RSSMiB
	pods := nDeploy * int(replicas)
	fmt.Printf("%d deployments x %d replicas created in %v; every ReplicaSet at %d replicas after %v: %.0f pods/s\n",
		nDeploy, replicas, created.Round(time.Millisecond), replicas, r.elapsed.Round(time.Millisecond), float64(pods)/r.elapsed.Seconds())
	fmt.Printf("controller-manager: %.1f CPU seconds, %s after (peak RSS seen %.0f MiB)\n", r.cpu, after.Memory(), peakRSS)
	// The calls made (the benchmark's creates and list polls included) say where a
	// difference in the controller-manager's CPU comes from.
	afterLoad, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return r, err
	}
	fmt.Println("API calls to the apiserver during the load (the benchmark's own included):")
	for _, c := range afterLoad.Requests.Since(before.Requests) {
		fmt.Printf("  %-48s %7.0f  %5.2f per deployment\n", c.Call, c.Count, c.Count/float64(nDeploy))
	}
	loaded(r.name)
	return r, nil
}

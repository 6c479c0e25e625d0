// Command ingress benchmarks `mizzen ingress`: requests/s and latency of one backend
// reached through the Ingress controller against the same backend reached directly, in
// the same run. The backend is agnhost netexec (the project's test image, run as a
// process on this machine); the controller is a real `mizzen ingress` process against a
// real `mizzen server`, routing by an Ingress to a Service whose EndpointSlice names the
// backend. Phases alternate (direct, ingress HTTP, ingress HTTPS, and again) so a
// change in the machine's load touches all of them alike.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/ingress
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/hostaddr"
	"mizzen/internal/ingress"
	"mizzen/internal/testing/proc"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	concurrency := flag.Int("c", 32, "concurrent clients, each on its own kept-alive connection")
	duration := flag.Duration("d", 10*time.Second, "length of each phase")
	rounds := flag.Int("rounds", 2, "times each phase runs, alternating")
	path := flag.String("path", "/hostname", "path requested of netexec")
	flag.Parse()
	if err := run(*bin, *concurrency, *duration, *rounds, *path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(bin string, concurrency int, duration time.Duration, rounds int, path string) error {
	dir, err := os.MkdirTemp("", "mizzen-bench-ingress-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	agnhost := filepath.Join(dir, "agnhost")
	build := exec.Command("go", "build", "-o", agnhost, "./test/images/agnhost")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building agnhost: %w", err)
	}
	// EndpointSlices refuse loopback addresses: the backend is reached, directly and
	// through the ingress, at the machine's own address.
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return err
	}
	backendPort := benchutil.FreePort()
	backend := exec.Command(agnhost, "netexec", "--http-port", strconv.Itoa(backendPort), "--udp-port", "-1")
	benchutil.DieWithParent(backend)
	if err := backend.Start(); err != nil {
		return err
	}
	defer proc.Stop(backend, 5*time.Second)

	srv, err := benchutil.StartServer(bin, "--disable", "agent,scheduler,controller-manager,dns,metrics-server,ingress")
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx := context.Background()
	if err := ingress.EnsureDefaultClass(ctx, srv.Client); err != nil {
		return err
	}
	httpPort, httpsPort := benchutil.FreePort(), benchutil.FreePort()
	ctrl := exec.Command(bin, "ingress", "--kubeconfig", srv.Kubeconfig, "--bind-address", "127.0.0.1",
		"--http-port", strconv.Itoa(httpPort), "--https-port", strconv.Itoa(httpsPort))
	ctrlLog, err := os.Create(filepath.Join(dir, "ingress.log"))
	if err != nil {
		return err
	}
	ctrl.Stdout, ctrl.Stderr = ctrlLog, ctrlLog
	benchutil.DieWithParent(ctrl)
	if err := ctrl.Start(); err != nil {
		return err
	}
	defer proc.Stop(ctrl, 10*time.Second)
	if err := createObjects(ctx, srv, hostIP.String(), backendPort); err != nil {
		return err
	}

	direct := fmt.Sprintf("http://%s:%d%s", hostIP, backendPort, path)
	viaHTTP := fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path)
	viaHTTPS := fmt.Sprintf("https://127.0.0.1:%d%s", httpsPort, path)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if code, err := once(viaHTTP); err == nil && code == http.StatusOK {
			break
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("the ingress did not route to the backend within a minute; see %s", ctrlLog.Name())
		}
	}

	type phase struct{ name, url string }
	phases := []phase{{"direct to netexec", direct}, {"through the ingress, HTTP/1.1", viaHTTP}, {"through the ingress, HTTPS (HTTP/1.1)", viaHTTPS}}
	results := map[string][]result{}
	for r := range rounds {
		for _, p := range phases {
			res := load(p.url, concurrency, duration)
			fmt.Fprintf(os.Stderr, "round %d, %s: %s\n", r+1, p.name, res)
			results[p.name] = append(results[p.name], res)
		}
	}
	fmt.Printf("%d clients, %v per phase, GET %s, %d rounds\n\n", concurrency, duration, path, rounds)
	fmt.Println("| path | requests/s | p50 | p99 | errors |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, p := range phases {
		for _, res := range results[p.name] {
			fmt.Printf("| %s | %.0f | %v | %v | %d |\n", p.name, res.rate, res.p50, res.p99, res.errors)
		}
	}
	return nil
}

// createObjects routes host-less requests to a Service whose EndpointSlice is the
// netexec process at ip:port.
func createObjects(ctx context.Context, srv *benchutil.Server, ip string, port int) error {
	c := srv.Client
	if _, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "netexec"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	name, p, ready := "http", int32(port), true
	if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "netexec-1", Labels: map[string]string{discoveryv1.LabelServiceName: "netexec"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	prefix := networkingv1.PathTypePrefix
	_, err := c.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "netexec", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}},
		metav1.CreateOptions{})
	return err
}

func once(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

type result struct {
	rate     float64
	p50, p99 time.Duration
	errors   int64
}

func (r result) String() string {
	return fmt.Sprintf("%.0f req/s, p50 %v, p99 %v, %d errors", r.rate, r.p50, r.p99, r.errors)
}

// load runs concurrency clients requesting url back to back for d.
func load(url string, concurrency int, d time.Duration) result {
	transport := &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      atomic.Int64
		wg        sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := result{rate: float64(len(latencies)) / elapsed.Seconds(), errors: errs.Load()}
	if len(latencies) > 0 {
		res.p50 = benchutil.Percentile(latencies, 0.50).Round(10 * time.Microsecond)
		res.p99 = benchutil.Percentile(latencies, 0.99).Round(10 * time.Microsecond)
	}
	return res
}

// Command controllers benchmarks `mizzen controller-manager` as its own process against
// a real `mizzen server` (etcd and apiserver only): it creates many Deployments at once
// and measures the time until every ReplicaSet reports all its replicas, and the
// controller-manager's CPU seconds and memory for it. Memory is reported as RSS and
// split into its anonymous part (heap, stacks: what the controller-manager itself
// holds) and its file-backed part (the mapped mizzen binary, shared page cache).
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/controllers
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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	deployments := flag.Int("deployments", 1000, "deployments to create")
	replicas := flag.Int("replicas", 10, "replicas of each")
	qps := flag.Int("kube-api-qps", 1000, "the controller-manager's client limit")
	heapProfile := flag.String("heap-profile", "", "write the controller-manager's heap profile after the load to this file")
	flag.Parse()
	if err := run(*bin, *deployments, int32(*replicas), *qps, *heapProfile); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// fetchHeapProfile saves the controller-manager's heap profile (self-signed HTTPS).
func fetchHeapProfile(port int, path string) error {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/heap", port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

func run(bin string, nDeploy int, replicas int32, qps int, heapProfile string) error {
	srv, err := benchutil.StartServer(bin, "--disable", "agent,scheduler,controller-manager")
	if err != nil {
		return err
	}
	defer srv.Stop()
	kubeconfig, client := srv.Kubeconfig, srv.Client
	cmPort := benchutil.FreePort()
	cm := exec.Command(bin, "controller-manager", "--kubeconfig", kubeconfig, "--leader-elect=false", "--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(2*qps),
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(cmPort), "--profiling="+strconv.FormatBool(heapProfile != ""))
	if err := cm.Start(); err != nil {
		return err
	}
	defer func() { _ = cm.Process.Kill(); _ = cm.Wait() }()
	time.Sleep(10 * time.Second)
	idle := benchutil.ProcStats(cm.Process.Pid)
	fmt.Printf("controller-manager idle: %s\n", idle.Memory())

	ctx := context.Background()
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
		if p := benchutil.ProcStats(cm.Process.Pid); p.RSSMiB > peakRSS {
			peakRSS = p.RSSMiB
		}
		list, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
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
			return fmt.Errorf("only %d of %d ReplicaSets full after 10 minutes", done, nDeploy)
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	after := benchutil.ProcStats(cm.Process.Pid)
	pods := nDeploy * int(replicas)
	fmt.Printf("%d deployments x %d replicas created in %v; every ReplicaSet at %d replicas after %v: %.0f pods/s\n",
		nDeploy, replicas, created.Round(time.Millisecond), replicas, elapsed.Round(time.Millisecond), float64(pods)/elapsed.Seconds())
	fmt.Printf("controller-manager: %.1f CPU seconds, %s after (peak RSS seen %.0f MiB)\n", after.CPUSeconds-idle.CPUSeconds, after.Memory(), peakRSS)
	if heapProfile != "" {
		return fetchHeapProfile(cmPort, heapProfile)
	}
	return nil
}

// Command snapshot times etcd snapshots of a real `mizzen server` process holding many
// ConfigMaps: `mizzen etcd-snapshot save` while it runs, then `mizzen server
// --cluster-reset --cluster-reset-restore-path` after it stops, and the restart to
// /readyz with every ConfigMap back. It prints one line per figure for BENCHMARKS.md.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/snapshot
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	n := flag.Int("configmaps", 10000, "ConfigMaps to create")
	flag.Parse()
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type server struct {
	cmd *exec.Cmd
	cs  *kubernetes.Clientset
}

func start(bin, dir string, port int) (*server, time.Duration, error) {
	begin := time.Now()
	cmd := exec.Command(bin, "server", "--data-dir", dir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--disable", "agent,scheduler,controller-manager,dns,metrics-server,ingress,dashboard", "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0",
		"--service-cluster-ip-range", "10.121.0.0/16", "--etcd-disable-snapshots")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	for time.Since(begin) < 120*time.Second {
		if c, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig")); err == nil {
			c.QPS, c.Burst = -1, 0
			cs := kubernetes.NewForConfigOrDie(c)
			if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
				return &server{cmd: cmd, cs: cs}, time.Since(begin), nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, 0, fmt.Errorf("server not ready after 120s")
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	_ = s.cmd.Wait()
}

func (s *server) count() (int, error) {
	list, err := s.cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{LabelSelector: "bench=snapshot"})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func run(bin string, n int) error {
	dir, err := os.MkdirTemp("", "mizzen-bench-snapshot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port := benchutil.FreePort()
	s, _, err := start(bin, dir, port)
	if err != nil {
		return err
	}
	defer s.stop()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 50 {
				_, err := s.cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"bench": "snapshot"}},
					Data:       map[string]string{"key": strings.Repeat("x", 100)}}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	begin := time.Now()
	out, err := exec.Command(bin, "etcd-snapshot", "save", "--data-dir", dir, "--name", "bench").CombinedOutput()
	if err != nil {
		return fmt.Errorf("save: %v: %s", err, out)
	}
	saved := time.Since(begin)
	snaps, _ := filepath.Glob(filepath.Join(dir, "db", "snapshots", "bench-*"))
	if len(snaps) != 1 {
		return fmt.Errorf("snapshots: %v", snaps)
	}
	info, err := os.Stat(snaps[0])
	if err != nil {
		return err
	}
	fmt.Printf("etcd-snapshot save, %d ConfigMaps (server running): %v, %.1f MiB\n", n, saved.Round(time.Millisecond), float64(info.Size())/(1<<20))
	s.stop()
	begin = time.Now()
	out, err = exec.Command(bin, "server", "--data-dir", dir, "--cluster-reset", "--cluster-reset-restore-path", snaps[0]).CombinedOutput()
	if err != nil {
		return fmt.Errorf("restore: %v: %s", err, out)
	}
	fmt.Printf("server --cluster-reset --cluster-reset-restore-path: %v\n", time.Since(begin).Round(time.Millisecond))
	s, ready, err := start(bin, dir, port)
	if err != nil {
		return err
	}
	got, err := s.count()
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("restored %d ConfigMaps, want %d", got, n)
	}
	fmt.Printf("restart after the restore to /readyz: %v (%d ConfigMaps back)\n", ready.Round(time.Millisecond), got)
	return nil
}

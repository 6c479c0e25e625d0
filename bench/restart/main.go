// Command restart measures how long a `mizzen server` (embedded etcd and the
// apiserver) holding many objects takes to start again on its data directory, after
// SIGTERM and after kill -9, from the process's start to /readyz, and its RSS once up.
// Every object must be there after each restart, or the run fails.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/restart [-objects 10000] [-restarts 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	objects := flag.Int("objects", 10000, "ConfigMaps (about 1 KiB each) the server holds")
	restarts := flag.Int("restarts", 3, "restarts of each kind")
	flag.Parse()
	if err := run(*bin, *objects, *restarts); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// controlPlaneOnly leaves out everything but etcd and the apiserver.
var controlPlaneOnly = []string{"--disable", "agent,scheduler,controller-manager,ingress,dns,metrics-server"}

func run(bin string, objects, restarts int) error {
	s, err := benchutil.StartServer(bin, controlPlaneOnly...)
	if err != nil {
		return err
	}
	defer func() { s.Stop() }()
	port := portOf(s)
	if err := fill(s, objects); err != nil {
		return err
	}
	fmt.Printf("holding %d ConfigMaps (~1 KiB each); RSS %.0f MiB\n", objects, benchutil.ProcStats(s.Cmd.Process.Pid).RSSMiB)
	for _, how := range []string{"SIGTERM", "kill -9"} {
		var took []time.Duration
		var rss []float64
		for i := 0; i < restarts; i++ {
			if how == "SIGTERM" {
				s.Interrupt()
			} else {
				_ = s.Cmd.Process.Kill()
				_ = s.Cmd.Wait()
			}
			start := time.Now()
			next, err := benchutil.StartServerIn(bin, s.Dir, port, controlPlaneOnly...)
			if err != nil {
				return err
			}
			s = next
			took = append(took, time.Since(start))
			if err := check(s, objects); err != nil {
				return fmt.Errorf("after %s: %w", how, err)
			}
			time.Sleep(3 * time.Second)
			rss = append(rss, benchutil.ProcStats(s.Cmd.Process.Pid).RSSMiB)
		}
		slices.Sort(took)
		slices.Sort(rss)
		fmt.Printf("restart after %s, start to /readyz: median %v, max %v (%d restarts); RSS after: median %.0f MiB\n",
			how, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), restarts, rss[len(rss)/2])
	}
	return nil
}

// portOf is the server's --secure-port.
func portOf(s *benchutil.Server) int {
	var port int
	host := s.Config.Host
	_, _ = fmt.Sscanf(host[strings.LastIndex(host, ":")+1:], "%d", &port)
	return port
}

// fill creates n ConfigMaps with 50 workers.
func fill(s *benchutil.Server, n int) error {
	ctx := context.Background()
	data := strings.Repeat("x", 1000)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)}, Data: map[string]string{"d": data}}
				if _, err := s.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// check lists the ConfigMaps and fails unless all n are there.
func check(s *benchutil.Server, n int) error {
	list, err := s.Client.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			have++
		}
	}
	if have != n {
		return fmt.Errorf("%d of %d ConfigMaps after the restart", have, n)
	}
	return nil
}

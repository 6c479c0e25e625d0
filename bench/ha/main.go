// Command ha measures how long a cluster of three servers takes to accept writes again
// after the server whose etcd member leads is killed with SIGKILL: from the kill to
// the next successful write through another server, over several kills, each killed
// server restarted with the same flags (and rejoining) before the next kill. Each
// server runs in its own network namespace (internal/testing/netlab); run as root.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/ha [-kills 10]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/testing/netlab"
)

const port = 16443

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	kills := flag.Int("kills", 10, "kills of the leader's server")
	flag.Parse()
	if err := run(*bin, *kills); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type server struct {
	m    *netlab.Machine
	dir  string
	args []string
	cmd  *exec.Cmd
	log  bytes.Buffer
	// exited is closed once cmd has been waited for.
	exited chan struct{}
}

// stop interrupts the server and waits for it, killing it after 20 s.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// kill stops the server with SIGKILL, as a crash would.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *server) url() string { return "https://" + s.m.Addr.String() + ":" + strconv.Itoa(port) }

func (s *server) start(bin string) error {
	s.log.Reset()
	s.cmd = s.m.Command(context.Background(), bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = s.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited: %s", s.m.Name, s.log.String())
		default:
		}
		if c, err := s.client(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if err == nil && string(body) == "ok" {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 2m", s.m.Name)
}

func (s *server) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(s.url(), filepath.Join(s.dir, "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 1000, 1000, 10*time.Second
	return kubernetes.NewForConfig(cfg)
}

func run(bin string, kills int) error {
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	lab, err := netlab.New("mznhb", "10.250.157.0/24", 3)
	if err != nil {
		return err
	}
	base, err := os.MkdirTemp("", "mizzen-bench-ha-")
	if err != nil {
		return err
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
		_ = lab.Close()
		_ = os.RemoveAll(base)
	}()
	common := []string{"--secure-port", strconv.Itoa(port), "--disable", "agent,ingress,dashboard", "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0",
		"--pod-bridge", "mznh1", "--cluster-cidr", "10.157.0.0/16", "--service-cluster-ip-range", "10.71.0.0/16", "--etcd-disable-snapshots"}
	for i, m := range lab.Machines {
		dir := filepath.Join(base, fmt.Sprintf("server-%d", i+1))
		servers = append(servers, &server{m: m, dir: dir, args: append([]string{"server", "--data-dir", dir}, common...)})
	}
	servers[0].args = append(servers[0].args, "--cluster-init")
	if err := servers[0].start(bin); err != nil {
		return err
	}
	out, err := servers[0].m.Run(context.Background(), bin, "token", "create", "--role", "server", "--data-dir", servers[0].dir)
	if err != nil {
		return err
	}
	for _, s := range servers[1:] {
		s.args = append(s.args, "--server", servers[0].url(), "--token", strings.TrimSpace(out))
		if err := s.start(bin); err != nil {
			return err
		}
	}
	fmt.Printf("3 servers up (netlab machines %s)\n", lab.Prefix)
	var took []time.Duration
	for k := 0; k < kills; k++ {
		leader, err := leaderOf(servers)
		if err != nil {
			return err
		}
		via := servers[(leader+1)%len(servers)]
		d, err := killAndWrite(servers[leader], via)
		if err != nil {
			return err
		}
		took = append(took, d)
		fmt.Printf("kill %d: %s (etcd leader) killed, next write through %s after %v\n", k+1, servers[leader].m.Name, via.m.Name, d.Round(time.Millisecond))
		if err := servers[leader].start(bin); err != nil {
			return err
		}
		if err := waitVoters(servers, 3); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	fmt.Printf("kill -9 of the etcd leader's server to the next successful write through another server: p50 %v, max %v (%d kills)\n",
		sorted[(len(sorted)-1)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), len(sorted))
	return nil
}

// killAndWrite starts a write through via every 20 ms, each in its own goroutine, kills
// victim, and returns the time from the kill to the end of the first successful write
// that started after it.
func killAndWrite(victim, via *server) (time.Duration, error) {
	c, err := via.client()
	if err != nil {
		return 0, err
	}
	type result struct{ start, end time.Time }
	var mu sync.Mutex
	var ok []result
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var killedAt time.Time
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("w-%d-%d", start.UnixNano(), i)}}, metav1.CreateOptions{})
				if err == nil {
					mu.Lock()
					ok = append(ok, result{start, time.Now()})
					mu.Unlock()
				}
			}(i)
		}
	}()
	time.Sleep(time.Second)
	killedAt = time.Now()
	victim.kill()
	deadline := time.Now().Add(60 * time.Second)
	var best time.Duration
	for best == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		for _, r := range ok {
			if r.start.After(killedAt) && (best == 0 || r.end.Sub(killedAt) < best) {
				best = r.end.Sub(killedAt)
			}
		}
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	if best == 0 {
		return 0, errors.New("no successful write within 60s of the kill")
	}
	return best, nil
}

// leaderOf is the index of the server whose etcd member leads.
func leaderOf(servers []*server) (int, error) {
	cli, err := dial(servers)
	if err != nil {
		return 0, err
	}
	defer cli.close()
	for i, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, "https://"+s.m.Addr.String()+":2379")
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return 0, errors.New("no etcd member says it leads")
}

func waitVoters(servers []*server, n int) error {
	cli, err := dial(servers)
	if err != nil {
		return err
	}
	defer cli.close()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		list, err := cli.MemberList(ctx)
		cancel()
		if err == nil {
			voters := 0
			for _, m := range list.Members {
				if !m.IsLearner && m.Name != "" {
					voters++
				}
			}
			if voters == n {
				if _, err := leaderOf(servers); err == nil {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not %d voting etcd members after 1m", n)
}

type etcdClient struct {
	*clientv3.Client
}

func (c etcdClient) close() { _ = c.Close() }

func dial(servers []*server) (etcdClient, error) {
	var eps []string
	for _, s := range servers {
		eps = append(eps, "https://"+s.m.Addr.String()+":2379")
	}
	cli, err := etcd.Dial(context.Background(), strings.Join(eps, ","), etcdsnapshot.EmbeddedClientFiles(datadir.Dir(servers[0].dir)))
	return etcdClient{cli}, err
}

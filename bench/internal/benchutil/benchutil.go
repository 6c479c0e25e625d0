// Package benchutil holds what the benchmark programs share: starting a `mizzen server`
// process on a free port in a temporary data directory and waiting for it, reading a
// process's CPU time and memory from /proc, and percentiles.
package benchutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ProcStats returns a process's CPU seconds (user+system) and resident memory in MiB,
// or -1s when the process is gone.
func ProcStats(pid int) (cpuSeconds, rssMiB float64) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, -1
	}
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	rssMiB = -1
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			rssMiB = kb / 1024
		}
	}
	return (utime + stime) / 100, rssMiB // clock ticks are 100 per second on Linux
}

// Percentile returns the p-th quantile (0..1) of d, which it sorts.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(float64(len(d)-1) * p)
	return d[i]
}

// Server is a `mizzen server` process started by Start.
type Server struct {
	Cmd        *exec.Cmd
	Dir        string // its data directory
	Kubeconfig string // the admin kubeconfig
	// Config and Client are the admin's, without a client-side rate limit.
	Config *rest.Config
	Client *kubernetes.Clientset
}

// StartServer runs `bin server` with a temporary data directory on a free port of
// 127.0.0.1, plus args, and waits until /readyz answers ok.
func StartServer(bin string, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-")
	if err != nil {
		return nil, err
	}
	port := FreePort()
	cmd := exec.Command(bin, append([]string{"server", "--data-dir", dir, "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port)}, args...)...)
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Cmd: cmd, Dir: dir, Kubeconfig: filepath.Join(dir, "admin.kubeconfig")}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 2*time.Minute {
			s.Stop()
			return nil, fmt.Errorf("mizzen server not ready after 2 minutes; see %s", logFile.Name())
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
		if err != nil {
			continue
		}
		cfg.QPS, cfg.Burst = -1, 0
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			continue
		}
		if body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
			s.Config, s.Client = cfg, c
			return s, nil
		}
	}
}

// Stop interrupts the server, waits for it, and removes its data directory.
func (s *Server) Stop() {
	_ = s.Cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.Cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(s.Dir)
}

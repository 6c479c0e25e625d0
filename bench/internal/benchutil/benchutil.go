// Package benchutil holds what the benchmark programs share: starting a `mizzen server`
// process on a free port in a temporary data directory and waiting for it, reading a
// process's CPU time and memory from /proc, and percentiles.
package benchutil

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"mizzen/internal/datadir"
	"mizzen/internal/testing/freeport"
	"mizzen/internal/testing/proc"
)

// FreePort returns a TCP port on 127.0.0.1 that no one listens on and no outgoing
// connection can take before the process it is given to binds it.
func FreePort() int { return freeport.MustGet() }

// Proc is what /proc says of a process.
type Proc struct {
	CPUSeconds float64 // user + system
	RSSMiB     float64 // resident memory, VmRSS
	// AnonMiB is the private part of RSSMiB (RssAnon); FileMiB (RssFile) are pages of
	// the mizzen binary, shared by every process that runs it.
	AnonMiB, FileMiB float64
}

// Memory says a process's resident memory in words.
func (p Proc) Memory() string {
	return fmt.Sprintf("RSS %.0f MiB (anonymous %.0f, file-backed %.0f)", p.RSSMiB, p.AnonMiB, p.FileMiB)
}

// ProcStats reads a process's CPU time and memory; all -1 when it is gone.
func ProcStats(pid int) Proc {
	p := Proc{CPUSeconds: -1, RSSMiB: -1, AnonMiB: -1, FileMiB: -1}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p
	}
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	p.CPUSeconds = (utime + stime) / 100 // clock ticks are 100 per second on Linux
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			p.RSSMiB = kb / 1024
		case "RssAnon:":
			p.AnonMiB = kb / 1024
		case "RssFile:":
			p.FileMiB = kb / 1024
		}
	}
	return p
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

// Median is the middle of v, or the mean of the two middle values when v has an even
// length (with two alternating rounds, the upper one alone would be the worse round's
// figure for one side and the better one's for the other). v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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

// DieWithParent has the kernel stop cmd (SIGTERM) when the benchmark process ends, also
// when it ends by a signal or os.Exit without running its clean-up: a benchmark killed
// by a timeout must not leave a cluster running that skews every later figure.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// StartServer runs `bin server` with a temporary data directory on a free port of
// 127.0.0.1, plus args, and waits until /readyz answers ok.
func StartServer(bin string, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-")
	if err != nil {
		return nil, err
	}
	return StartServerIn(bin, dir, FreePort(), args...)
}

// StartServerIn runs `bin server` on dir and port (a restart, when dir holds a
// cluster already), plus args, and waits until /readyz answers ok.
func StartServerIn(bin, dir string, port int, args ...string) (*Server, error) {
	if err := ecdsaServiceAccountKey(bin, dir); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"server", "--data-dir", dir, "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port), "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0", "--dashboard-port", "0",
		"--ingress-http-port", strconv.Itoa(FreePort()), "--ingress-https-port", strconv.Itoa(FreePort())}, args...)...)
	logFile, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	DieWithParent(cmd)
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

// ecdsaServiceAccountKey gives a new data directory an ECDSA P-256 service account
// key, the kind the upstream control plane of these benchmarks signs with
// (writeServiceAccountKey), so that both sides sign tokens with ES256. A binary that
// signs with RSA only (before --service-account-signing-key-file) keeps its default.
func ecdsaServiceAccountKey(bin, dir string) error {
	tls := datadir.Dir(dir).TLS()
	if _, err := os.Stat(datadir.Dir(dir).ServiceAccountKey()); err == nil {
		return nil
	}
	help, _ := exec.Command(bin, "server", "--help").CombinedOutput()
	if !strings.Contains(string(help), "--service-account-signing-key-file") {
		return nil
	}
	if err := os.MkdirAll(tls, 0o700); err != nil {
		return err
	}
	_, _, err := writeServiceAccountKey(tls)
	return err
}

// Stop interrupts the server, waits for it, and removes its data directory.
func (s *Server) Stop() {
	s.Interrupt()
	_ = os.RemoveAll(s.Dir)
}

// Interrupt stops the server as SIGTERM does and waits for it, keeping its data.
func (s *Server) Interrupt() { proc.Stop(s.Cmd, 30*time.Second) }

// CPUAccount moves this process into a cgroup of its own in the cgroup v1 cpuacct
// hierarchy, so that it and every process it starts from now on (servers, runtimes,
// their plugins) are counted together, and returns a function reading their CPU time
// so far. It is a load-independent measure of what a figure costs: wall-clock latency
// on a busy machine says little, CPU seconds per pod stay put.
func CPUAccount(name string) (func() time.Duration, error) {
	dir := filepath.Join("/sys/fs/cgroup/cpuacct", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	return func() time.Duration {
		b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			return -1
		}
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns)
	}, nil
}

// QuietKlog discards klog's output, errors included: client-go and the CRI client log
// through it, and their retries would bury a benchmark's figures.
func QuietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

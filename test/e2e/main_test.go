// Package e2e runs the mizzen binary as real processes and drives them as a user
// would: through the embedded kubectl and client-go.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/testing/freeport"
	"mizzen/internal/testing/lanes"
	"mizzen/internal/testing/proc"
	"mizzen/internal/version"
)

// mizzenBin is the binary built once for all tests.
var mizzenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mizzen-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mizzenBin = filepath.Join(dir, "mizzen")
	// Stamped as `make build` stamps it, so kubectl version and /version read as a release's.
	build := exec.Command("go", "build", "-ldflags", buildLDFlags(), "-o", mizzenBin, "mizzen/cmd/mizzen")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building mizzen:", err)
		os.Exit(1)
	}
	// The agent's sandbox program lives beside the binary, as `make build` puts it.
	pause := exec.Command("go", "build", "-o", filepath.Join(dir, "mizzen-pause"), "mizzen/internal/kubelet/containerd/pause")
	pause.Env = append(os.Environ(), "CGO_ENABLED=0")
	pause.Stdout, pause.Stderr = os.Stderr, os.Stderr
	if err := pause.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building mizzen-pause:", err)
		os.Exit(1)
	}
	flag.Parse()
	longTests = scheduleLongTests()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildLDFlags stamps the version variables with the checkout's commit and tree state.
func buildLDFlags() string {
	commit, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	status, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	state := "clean"
	if len(bytes.TrimSpace(status)) > 0 {
		state = "dirty"
	}
	return version.LDFlags(strings.TrimSpace(string(commit)), state, time.Now().UTC().Format(time.RFC3339))
}

// longTests runs the tests marked sideBySide two at a time (GOMAXPROCS), longest
// first: longestFirst is their order, from a run of the package on 2 cores.
var (
	longTests    *lanes.Scheduler
	longestFirst = []string{"TestDensity", "TestSeveralServers", "TestBundleSurvivesRestarts", "TestPersistentStorage",
		"TestStorageAcrossNodes", "TestStorageDevicesAndGroups", "TestPodNetworkAcrossNodes", "TestIngress",
		"TestCloudControllerManager", "TestPodsOnContainerd", "TestNodeServerStreams", "TestVolumesOnContainerd",
		"TestServiceProxy", "TestJoinWithToken", "TestEtcdSnapshotSaveRestore", "TestAdmissionWebhookOnContainerd",
		"TestHorizontalPodAutoscaler", "TestKubectlTop", "TestCRDConversionWebhookOnContainerd", "TestCloudControllerManagerBundled"}
)

// scheduleLongTests returns the scheduler of the sideBySide tests. Unless -parallel
// was given, it raises -parallel so that every marked test reaches the scheduler,
// which then lets GOMAXPROCS of them (-parallel's default) run at once; a -parallel
// given by hand is left to do its usual job, in no particular order.
func scheduleLongTests() *lanes.Scheduler {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		return lanes.New(0, nil)
	}
	if err := flag.Set("test.parallel", "1000"); err != nil {
		panic(err)
	}
	return lanes.New(runtime.GOMAXPROCS(0), longestFirst)
}

// sideBySide marks a long test that runs beside the package's other such tests once
// the sequential tests are done (see longTests). A test may be marked only when
// everything it makes on the host is its own: a data directory of its own (hence its
// own containerd socket, kubelet root and pod cgroups), its own pod bridge (which
// names its nftables tables and vxlan device), pod and service CIDRs and netlab prefix
// and subnet no other marked test uses, and ports from freePort; and when nothing it
// asserts is a deadline that a busier machine could miss (TestFaults' convergence
// within convergeDeadline stays sequential). Tests that change or inspect the host as
// a whole (TestKillallLeavesNothing, TestDashboard's host network change) stay
// sequential too.
func sideBySide(t *testing.T) {
	t.Helper()
	longTests.Register(t.Name())
	t.Parallel()
	waited := time.Now()
	// Registered first, so run last: the lane is free once the test's cluster is gone.
	t.Cleanup(longTests.Acquire(t.Name()))
	t.Logf("waited %v for a lane; the test's own time starts here", time.Since(waited).Round(time.Millisecond))
}

// freePort is a loopback port for a process the test starts (see freeport for why not
// the ephemeral port of a closed listener).
func freePort(t *testing.T) int { return freeport.Get(t) }

// cluster is a `mizzen server` process.
type cluster struct {
	t          *testing.T
	dataDir    string
	port       int
	kubeconfig string
	cmd        *exec.Cmd
	log        *bytes.Buffer
	// controllerManagerPort serves the bundled controller-manager's /healthz and /metrics.
	controllerManagerPort int
	// schedulerPort serves the bundled scheduler's /healthz and /metrics.
	schedulerPort int
	// ingressHTTPPort and ingressHTTPSPort are the bundled Ingress controller's, free
	// ports rather than the node's 80 and 443.
	ingressHTTPPort, ingressHTTPSPort int
	// dashboardPort serves the bundled dashboard.
	dashboardPort int
	// proxyHealthzPort serves the bundled proxy's /healthz.
	proxyHealthzPort int
}

// startServer starts `mizzen server` with the given extra flags and waits for /readyz.
func startServer(t *testing.T, dataDir string, port int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dataDir: dataDir, port: port, kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"), log: &bytes.Buffer{},
		controllerManagerPort: freePort(t), schedulerPort: freePort(t), ingressHTTPPort: freePort(t), ingressHTTPSPort: freePort(t), dashboardPort: freePort(t),
		proxyHealthzPort: freePort(t)}
	args := append([]string{"server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--controller-manager-secure-port", strconv.Itoa(c.controllerManagerPort), "--scheduler-secure-port", strconv.Itoa(c.schedulerPort),
		"--ingress-http-port", strconv.Itoa(c.ingressHTTPPort), "--ingress-https-port", strconv.Itoa(c.ingressHTTPSPort),
		"--dashboard-port", strconv.Itoa(c.dashboardPort), "--proxy-healthz-port", strconv.Itoa(c.proxyHealthzPort),
		"--proxy-metrics-bind-address", "127.0.0.1:" + strconv.Itoa(freePort(t))}, extra...)
	c.cmd = exec.Command(mizzenBin, args...)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			// A server that died under a test shows up only as refused connections:
			// say how it ended and what it printed last.
			t.Logf("mizzen server (%s) ended: %v; the end of its log:\n%s", dataDir, c.cmd.ProcessState, tail(c.log.String(), 60))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := c.kubectlErr("get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready after 60s: %v %s\nlog:\n%s", err, out, c.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("mizzen server ready in %v", time.Since(start).Round(time.Millisecond))
	return c
}

// tail is the last lines lines of s (a log), not counting its final newline.
func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func (c *cluster) stop() { proc.Stop(c.cmd, 15*time.Second) }

// kill stops the server abruptly, as a crash would.
func (c *cluster) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

func (c *cluster) kubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mizzenBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kubectl runs the embedded kubectl and fails the test if it fails.
func (c *cluster) kubectl(args ...string) string {
	c.t.Helper()
	out, err := c.kubectlErr(args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kubectlStdin runs kubectl with input on stdin.
func (c *cluster) kubectlStdin(stdin string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(mizzenBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readyNode waits until a node is Ready with a pod CIDR and returns its name, then
// imports the busybox image into the bundled agent's containerd, so a test's pods need
// not wait for the agent's own import.
func readyNode(t *testing.T, ctx context.Context, client kubernetes.Interface, dataDir, images string) string {
	t.Helper()
	var node string
	eventually(t, 90*time.Second, func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue && n.Spec.PodCIDR != "" {
					node = n.Name
					return nil
				}
			}
		}
		return fmt.Errorf("no Ready node with a pod CIDR yet")
	})
	importCtx, cancelImport := context.WithTimeout(ctx, time.Minute)
	defer cancelImport()
	if err := containerd.ImportArchive(importCtx, containerd.Options{DataDir: filepath.Join(dataDir, "agent", "containerd")}, filepath.Join(images, "busybox.tar")); err != nil {
		t.Fatal(err)
	}
	return node
}

// stageImages links the named archives of the test images (from testImages) into the
// agent's images directory of dataDir, which the agent imports as it starts.
func stageImages(t *testing.T, dataDir, images string, names ...string) {
	t.Helper()
	dir := datadir.Dir(dataDir).Images()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := os.Symlink(filepath.Join(images, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

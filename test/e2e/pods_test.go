package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/datadir"
	"mizzen/internal/killall"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/testing/proc"
)

// The test images, built by `make images` (or by the first test that needs them).
const (
	agnhostImage = "mizzen.local/agnhost:v1"
	busyboxImage = "mizzen.local/busybox:v1"
)

// Network of the pod tests' cluster: distinct from other clusters on this host.
const (
	podsClusterCIDR = "10.213.0.0/16"
	podsBridge      = "mzn-images"
	podsNode        = "images-e2e"
)

var buildImagesOnce = sync.OnceValues(func() (string, error) {
	dir, err := filepath.Abs("../../_output/images")
	if err != nil {
		return "", err
	}
	agnhost, errA := os.Stat(filepath.Join(dir, "agnhost.tar"))
	_, errB := os.Stat(filepath.Join(dir, "busybox.tar"))
	if errA == nil && errB == nil && !newerSources(agnhost.ModTime(), "../images/agnhost") {
		return dir, nil
	}
	cmd := exec.Command("go", "run", "mizzen/test/images/build", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building test images: %w\n%s", err, out)
	}
	return dir, nil
})

// newerSources tells whether a Go file in dir changed after t: a tarball built before a
// new agnhost subcommand was added lacks it.
func newerSources(t time.Time, dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.ModTime().After(t) {
			return true
		}
	}
	return false
}

// testImages returns the directory holding agnhost.tar and busybox.tar.
func testImages(t *testing.T) string {
	t.Helper()
	dir, err := buildImagesOnce()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// requireNodeRuntime skips tests that need root and containerd where they are missing.
func requireNodeRuntime(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running pods needs root")
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (make deps)", bin)
		}
	}
}

// agent is a `mizzen agent` process joined to a cluster.
type agent struct {
	t       *testing.T
	args    []string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	dataDir string
}

func startAgent(t *testing.T, c *cluster, dataDir string) *agent {
	t.Helper()
	a := &agent{t: t, dataDir: dataDir, args: []string{"agent", "--kubeconfig", c.kubeconfig, "--data-dir", dataDir,
		"--node-name", podsNode, "--pod-bridge", podsBridge, "--kubelet-port", strconv.Itoa(freePort(t))}}
	a.start()
	return a
}

func (a *agent) start() {
	a.t.Helper()
	a.log = &bytes.Buffer{}
	a.cmd = exec.Command(mizzenBin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
}

// stop asks the agent to stop and waits for it.
func (a *agent) stop() { proc.Stop(a.cmd, 30*time.Second) }

// kill ends the agent abruptly, as a crash would.
func (a *agent) kill() {
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
}

// cleanupNode removes everything a node of dataDir left on the host, as `mizzen
// uninstall` does: its processes and pods, their mounts and cgroups, the pod network,
// and the directory.
func cleanupNode(t *testing.T, dataDir, bridge string) {
	if _, err := killall.Uninstall(killall.Options{Dir: datadir.Dir(dataDir), Bridge: bridge, GracePeriod: 5 * time.Second}); err != nil {
		t.Logf("cleaning up %s: %v", dataDir, err)
	}
}

// processesMentioning returns the processes whose command line mentions s: a node's
// containerd and container shims name its data directory.
func processesMentioning(s string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// getPod reads a pod through kubectl as JSON.
func (c *cluster) getPod(ns, name string) (*v1.Pod, error) {
	out, err := c.kubectlErr("get", "pod", "-n", ns, name, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var pod v1.Pod
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		return nil, err
	}
	return &pod, nil
}

// waitPod polls the pod until check accepts it and returns the pod it accepted.
func (c *cluster) waitPod(ns, name string, timeout time.Duration, check func(*v1.Pod) error) *v1.Pod {
	c.t.Helper()
	var accepted *v1.Pod
	eventually(c.t, timeout, func() error {
		pod, err := c.getPod(ns, name)
		if err != nil {
			return err
		}
		if err := check(pod); err != nil {
			return fmt.Errorf("pod %s/%s: %w", ns, name, err)
		}
		accepted = pod
		return nil
	})
	return accepted
}

func runningAndReady(pod *v1.Pod) error {
	if pod.Status.Phase != v1.PodRunning {
		return fmt.Errorf("phase %q", pod.Status.Phase)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("not ready: %+v", pod.Status.Conditions)
}

func firstContainer(pod *v1.Pod) (v1.ContainerStatus, error) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return v1.ContainerStatus{}, fmt.Errorf("no container statuses yet")
	}
	return pod.Status.ContainerStatuses[0], nil
}

// httpGet fetches url over a connection of its own: a kept-alive one would stay with the
// endpoint it first reached.
func httpGet(url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

const netexecPod = `apiVersion: v1
kind: Pod
metadata:
  name: netexec
spec:
  containers:
  - name: netexec
    image: mizzen.local/agnhost:v1
    args: ["netexec", "--http-port=8080", "--udp-port=8081"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
`

const crashingPod = `apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  containers:
  - name: crasher
    image: mizzen.local/agnhost:v1
    args: ["fail", "3"]
`

const livenessPod = `apiVersion: v1
kind: Pod
metadata:
  name: liveness
spec:
  containers:
  - name: liveness
    image: mizzen.local/agnhost:v1
    args: ["liveness", "--healthy-for=3s"]
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 2
`

const oomPod = `apiVersion: v1
kind: Pod
metadata:
  name: hog
spec:
  containers:
  - name: hog
    image: mizzen.local/agnhost:v1
    args: ["stress", "--mem-total=300Mi", "--mem-alloc-size=10Mi"]
    resources:
      limits: {memory: 50Mi}
`

// nonRootPods ask to run as non-root: one from the busybox image, which names no user
// (root), the other as user 1000.
const nonRootPods = `apiVersion: v1
kind: Pod
metadata:
  name: nonroot-refused
spec:
  containers:
  - name: app
    image: mizzen.local/busybox:v1
    command: ["sleep", "3600"]
    securityContext: {runAsNonRoot: true}
---
apiVersion: v1
kind: Pod
metadata:
  name: nonroot-uid
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 1000}
  containers:
  - name: app
    image: mizzen.local/busybox:v1
    command: ["id", "-u"]
`

// seccompPods print their seccomp mode: one under the runtime's default profile (the
// pod's), one whose container asks for none.
const seccompPods = `apiVersion: v1
kind: Pod
metadata:
  name: seccomp-default
spec:
  restartPolicy: Never
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: mizzen.local/busybox:v1
    command: ["grep", "Seccomp:", "/proc/self/status"]
---
apiVersion: v1
kind: Pod
metadata:
  name: seccomp-unconfined
spec:
  restartPolicy: Never
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: mizzen.local/busybox:v1
    command: ["grep", "Seccomp:", "/proc/self/status"]
    securityContext: {seccompProfile: {type: Unconfined}}
`

// terminationPod logs its preStop hook and the SIGTERM it gets, then exits at once.
const terminationPod = `apiVersion: v1
kind: Pod
metadata:
  name: graceful
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: app
    image: mizzen.local/busybox:v1
    command: ["sh", "-c", "trap 'echo got SIGTERM; sleep 1; exit 0' TERM; echo started; while true; do sleep 1; done"]
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop ran > /proc/1/fd/1"]
`

const staticPodManifest = `apiVersion: v1
kind: Pod
metadata:
  name: static-web
  labels: {app: static-web}
spec:
  containers:
  - name: web
    image: mizzen.local/agnhost:v1
    args: ["serve-hostname"]
`

// TestPodsOnContainerd runs a cluster with a `mizzen agent` on real containerd and
// drives pods through their lives as a user would see them.
func TestPodsOnContainerd(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir, err := os.MkdirTemp("", "mizzen-e2e-pods-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupNode(t, dataDir, podsBridge) })
	// The agent imports what is in DATA_DIR/agent/images when it starts (agnhost here);
	// busybox goes in later through `mizzen image import`.
	agentImages := filepath.Join(dataDir, "agent", "images")
	manifests := filepath.Join(dataDir, "agent", "pod-manifests")
	for _, d := range []string{agentImages, manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(images, "agnhost.tar"), filepath.Join(agentImages, "agnhost.tar")); err != nil {
		t.Fatal(err)
	}
	staticManifest := filepath.Join(manifests, "static-web.yaml")
	if err := os.WriteFile(staticManifest, []byte(staticPodManifest), 0o644); err != nil {
		t.Fatal(err)
	}

	c := startServer(t, dataDir, freePort(t), "--disable", "agent", "--cluster-cidr", podsClusterCIDR, "--pod-bridge", podsBridge)
	a := startAgent(t, c, dataDir)
	t.Cleanup(func() {
		// Stop the pods before the agent, so nothing outlives the test.
		_ = os.Remove(staticManifest)
		_, _ = c.kubectlErr("delete", "pods", "--all", "--wait=true", "--timeout=60s")
		runtime := containerd.Options{DataDir: filepath.Join(dataDir, "agent", "containerd")}
		if err := containerd.RemoveAllPods(context.Background(), runtime); err != nil {
			t.Logf("removing the node's pods: %v", err)
		}
		a.stop()
		if t.Failed() || os.Getenv("E2E_AGENT_LOG") != "" {
			t.Logf("agent log:\n%s", a.log.String())
		}
	})
	eventually(t, 2*time.Minute, func() error {
		out, err := c.kubectlErr("get", "node", podsNode, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		if err != nil || strings.TrimSpace(out) != "True" {
			return fmt.Errorf("node not ready: %v %s", err, out)
		}
		return nil
	})
	out, err := exec.Command(mizzenBin, "image", "import", "--data-dir", dataDir, filepath.Join(images, "busybox.tar")).CombinedOutput()
	if err != nil {
		t.Fatalf("mizzen image import: %v\n%s", err, out)
	}

	t.Run("netexec runs, becomes ready and serves its pod IP", func(t *testing.T) {
		c.kubectlStdin(netexecPod, "apply", "-f", "-")
		pod := c.waitPod("default", "netexec", 2*time.Minute, runningAndReady)
		if pod.Status.PodIP == "" || !strings.HasPrefix(pod.Status.PodIP, "10.213.") {
			t.Fatalf("pod IP %q, want one from %s", pod.Status.PodIP, podsClusterCIDR)
		}
		for path, want := range map[string]string{"/hostname": "netexec", "/echo?msg=ahoy": "ahoy"} {
			var got string
			eventually(t, 30*time.Second, func() (err error) {
				got, err = httpGet("http://" + pod.Status.PodIP + ":8080" + path)
				return err
			})
			if got != want {
				t.Errorf("GET %s = %q, want %q", path, got, want)
			}
		}
	})

	t.Run("a crashing container backs off and restarts", func(t *testing.T) {
		c.kubectlStdin(crashingPod, "apply", "-f", "-")
		sawBackOff := false
		pod := c.waitPod("default", "crasher", 2*time.Minute, func(pod *v1.Pod) error {
			cs, err := firstContainer(pod)
			if err != nil {
				return err
			}
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
			if cs.RestartCount < 2 || !sawBackOff {
				return fmt.Errorf("restartCount %d, CrashLoopBackOff seen: %v", cs.RestartCount, sawBackOff)
			}
			return nil
		})
		last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.ExitCode != 3 || last.Reason != "Error" {
			t.Errorf("lastState.terminated = %+v, want exit code 3, reason Error", last)
		}
		if pod.Status.Phase != v1.PodRunning {
			t.Errorf("phase %q, want Running (restartPolicy Always)", pod.Status.Phase)
		}
	})

	t.Run("a failing liveness probe restarts the container", func(t *testing.T) {
		c.kubectlStdin(livenessPod, "apply", "-f", "-")
		c.waitPod("default", "liveness", 2*time.Minute, func(pod *v1.Pod) error {
			cs, err := firstContainer(pod)
			if err != nil {
				return err
			}
			if cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil {
				return fmt.Errorf("restartCount %d, lastState %+v", cs.RestartCount, cs.LastTerminationState)
			}
			return nil
		})
		// The server answered 500 once its healthy time was over: that is what the probe saw.
		out := c.kubectl("get", "events", "--field-selector", "involvedObject.name=liveness", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
		if !strings.Contains(out, "Unhealthy: Liveness probe failed: HTTP probe failed with statuscode: 500") || !strings.Contains(out, "Killing: ") {
			t.Errorf("events of the pod:\n%s\nwant Unhealthy (statuscode 500) and Killing", out)
		}
	})

	t.Run("a container over its memory limit ends OOMKilled", func(t *testing.T) {
		c.kubectlStdin(oomPod, "apply", "-f", "-")
		c.waitPod("default", "hog", 2*time.Minute, func(pod *v1.Pod) error {
			cs, err := firstContainer(pod)
			if err != nil {
				return err
			}
			last := cs.LastTerminationState.Terminated
			if last == nil || last.Reason != "OOMKilled" || last.ExitCode != 137 {
				return fmt.Errorf("lastState.terminated %+v, state %+v", last, cs.State)
			}
			return nil
		})
	})

	t.Run("runAsNonRoot refuses a root image and runs an explicit user", func(t *testing.T) {
		c.kubectlStdin(nonRootPods, "apply", "-f", "-")
		c.waitPod("default", "nonroot-refused", 2*time.Minute, func(pod *v1.Pod) error {
			cs, err := firstContainer(pod)
			if err != nil {
				return err
			}
			if w := cs.State.Waiting; w == nil || w.Reason != "CreateContainerConfigError" ||
				!strings.HasPrefix(w.Message, "container has runAsNonRoot and image will run as root") {
				return fmt.Errorf("state %+v, want CreateContainerConfigError: image will run as root", cs.State)
			}
			return nil
		})
		c.waitPod("default", "nonroot-uid", 2*time.Minute, func(pod *v1.Pod) error {
			if pod.Status.Phase != v1.PodSucceeded {
				return fmt.Errorf("phase %s", pod.Status.Phase)
			}
			return nil
		})
		if out := strings.TrimSpace(c.kubectl("logs", "nonroot-uid")); out != "1000" {
			t.Errorf("id -u printed %q, want 1000", out)
		}
		c.kubectl("delete", "pod", "nonroot-refused", "nonroot-uid", "--wait=false")
	})

	t.Run("seccomp profiles: the runtime's default filters, unconfined does not", func(t *testing.T) {
		c.kubectlStdin(seccompPods, "apply", "-f", "-")
		// /proc/self/status's Seccomp: 2 is a filter in force, 0 none.
		for pod, want := range map[string]string{"seccomp-default": "Seccomp:\t2", "seccomp-unconfined": "Seccomp:\t0"} {
			c.waitPod("default", pod, 2*time.Minute, func(p *v1.Pod) error {
				if p.Status.Phase != v1.PodSucceeded {
					return fmt.Errorf("phase %s", p.Status.Phase)
				}
				return nil
			})
			if out := strings.TrimSpace(c.kubectl("logs", pod)); out != want {
				t.Errorf("%s: %q, want %q", pod, out, want)
			}
		}
		c.kubectl("delete", "pod", "seccomp-default", "seccomp-unconfined", "--wait=false")
	})

	t.Run("deleting a pod runs preStop, then delivers SIGTERM", func(t *testing.T) {
		c.kubectlStdin(terminationPod, "apply", "-f", "-")
		pod := c.waitPod("default", "graceful", 2*time.Minute, runningAndReady)
		logFile := filepath.Join("/var/log/pods", "default_graceful_"+string(pod.UID), "app", "0.log")
		var logs string
		deleted := time.Now()
		c.kubectl("delete", "pod", "graceful", "--wait=false")
		eventually(t, 50*time.Second, func() error {
			if data, err := os.ReadFile(logFile); err == nil && len(data) > len(logs) {
				logs = string(data)
			}
			if _, err := c.getPod("default", "graceful"); err == nil {
				return fmt.Errorf("pod still there")
			}
			return nil
		})
		// The container exited on SIGTERM: the pod was gone well before the 60s grace
		// period would have ended in a SIGKILL.
		if gone := time.Since(deleted); gone > 50*time.Second {
			t.Errorf("pod took %v to go", gone)
		}
		preStop, term := strings.Index(logs, "prestop ran"), strings.Index(logs, "got SIGTERM")
		if preStop < 0 || term < 0 || preStop > term {
			t.Errorf("container log %q: want the preStop hook's line, then SIGTERM's", logs)
		}
		// Nothing of the pod stays on the host: runc leaves the pod's cgroup behind, in
		// every hierarchy, unless the kubelet removes it; its logs go too.
		eventually(t, 30*time.Second, func() error {
			var left []string
			for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods/pod%s", "/sys/fs/cgroup/*/kubepods/*/pod%s",
				"/sys/fs/cgroup/kubepods/pod%s", "/sys/fs/cgroup/kubepods/*/pod%s"} {
				found, _ := filepath.Glob(fmt.Sprintf(pattern, pod.UID))
				left = append(left, found...)
			}
			if len(left) > 0 {
				return fmt.Errorf("pod cgroups left: %v", left)
			}
			if _, err := os.Stat(filepath.Dir(filepath.Dir(logFile))); !os.IsNotExist(err) {
				return fmt.Errorf("pod log directory still there: %v", err)
			}
			return nil
		})
	})

	t.Run("a static pod runs and is mirrored", func(t *testing.T) {
		name := "static-web-" + podsNode
		mirror := c.waitPod("default", name, 2*time.Minute, runningAndReady)
		hash := mirror.Annotations["kubernetes.io/config.hash"]
		if hash == "" || mirror.Annotations["kubernetes.io/config.mirror"] != hash || mirror.Annotations["kubernetes.io/config.source"] != "file" {
			t.Errorf("mirror pod annotations %v", mirror.Annotations)
		}
		if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != podsNode {
			t.Errorf("mirror pod owners %+v, want the node", refs)
		}
		got, err := httpGet("http://" + mirror.Status.PodIP + ":9376/")
		if err != nil || got != name {
			t.Errorf("serve-hostname answered %q, %v; want %q", got, err, name)
		}
		containerID := mirror.Status.ContainerStatuses[0].ContainerID
		c.kubectl("delete", "pod", name, "--wait=false")
		again := c.waitPod("default", name, time.Minute, func(p *v1.Pod) error {
			if p.UID == mirror.UID {
				return fmt.Errorf("still the old mirror pod")
			}
			return runningAndReady(p)
		})
		if id := again.Status.ContainerStatuses[0].ContainerID; id != containerID {
			t.Errorf("container %s after the mirror's deletion, want %s still running", id, containerID)
		}
	})

	t.Run("a restarted agent adopts running pods", func(t *testing.T) {
		before := c.waitPod("default", "netexec", time.Minute, runningAndReady)
		mirrorBefore := c.waitPod("default", "static-web-"+podsNode, time.Minute, runningAndReady)
		a.kill()
		a.start()
		// A pod created now runs only once the new kubelet works.
		c.kubectlStdin(strings.ReplaceAll(netexecPod, "name: netexec\n", "name: netexec-after\n"), "apply", "-f", "-")
		c.waitPod("default", "netexec-after", 2*time.Minute, runningAndReady)
		// The killed agent's containerd went with it: one containerd serves the node.
		config := filepath.Join(dataDir, "agent", "containerd", "containerd.toml")
		eventually(t, 30*time.Second, func() error {
			if pids := processesMentioning("--config\x00" + config); len(pids) != 1 {
				return fmt.Errorf("containerd processes of the node: %v, want one", pids)
			}
			return nil
		})
		after := c.waitPod("default", "netexec", time.Minute, runningAndReady)
		b, n := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
		if n.RestartCount != 0 || n.ContainerID != b.ContainerID {
			t.Errorf("after the restart: container %s with %d restarts; want %s with 0", n.ContainerID, n.RestartCount, b.ContainerID)
		}
		if got, err := httpGet("http://" + after.Status.PodIP + ":8080/hostname"); err != nil || got != "netexec" {
			t.Errorf("pod after the restart answered %q, %v", got, err)
		}
		mirrorAfter := c.waitPod("default", "static-web-"+podsNode, time.Minute, runningAndReady)
		if mirrorAfter.UID != mirrorBefore.UID || mirrorAfter.Status.ContainerStatuses[0].ContainerID != mirrorBefore.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("static pod after the restart: mirror %s container %s; want mirror %s container %s kept",
				mirrorAfter.UID, mirrorAfter.Status.ContainerStatuses[0].ContainerID, mirrorBefore.UID, mirrorBefore.Status.ContainerStatuses[0].ContainerID)
		}
	})

	t.Run("removing a static pod's manifest stops it", func(t *testing.T) {
		mirror := c.waitPod("default", "static-web-"+podsNode, time.Minute, runningAndReady)
		if err := os.Remove(staticManifest); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, func() error {
			if _, err := c.getPod("default", mirror.Name); err == nil {
				return fmt.Errorf("mirror pod still there")
			}
			if _, err := httpGet("http://" + mirror.Status.PodIP + ":9376/"); err == nil {
				return fmt.Errorf("the static pod still answers")
			}
			return nil
		})
	})
}

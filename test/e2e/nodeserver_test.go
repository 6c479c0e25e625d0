package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
)

const streamsPodYAML = `apiVersion: v1
kind: Pod
metadata:
  name: bb
  namespace: default
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sh", "-c", "echo line-1; echo line-2; i=0; while true; do i=$((i+1)); echo tick-$i; sleep 1; done"]
  - name: web
    image: ` + busyboxImage + `
    command: ["sh", "-c", "mkdir -p /www; echo hello-from-pod > /www/index.html; exec httpd -f -p 8080 -h /www"]
  - name: echo
    image: ` + busyboxImage + `
    stdin: true
    command: ["sh", "-c", "while read l; do echo got:$l; done"]
`

// TestNodeServerStreams runs a cluster with an agent on a containerd of its own and
// drives logs, exec, attach and port-forward through the apiserver to the kubelet, in
// both the WebSocket and the SPDY protocols, and checks that callers without the right
// credentials are refused on both hops.
func TestNodeServerStreams(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	if os.Geteuid() != 0 {
		t.Skip("the agent needs root")
	}
	for _, bin := range []string{"containerd", "runc", "ctr", "/bin/busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	images := testImages(t)
	dataDir := t.TempDir()
	bridge := "mzn-nodesrv"
	kubeletPort := freePort(t)
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", "10.214.0.0/16", "--pod-bridge", bridge,
		"--kubelet-port", strconv.Itoa(kubeletPort),
		// The bundled agent's serving certificate comes from the cluster CA: verify it.
		"--kubelet-certificate-authority", filepath.Join(dataDir, "tls", "ca.crt"))
	t.Cleanup(func() { cleanupHost(t, c, dataDir, bridge) })

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	node := readyNode(t, ctx, client, dataDir, images)

	c.kubectlStdin(fmt.Sprintf(streamsPodYAML, node), "apply", "-f", "-")
	eventually(t, 120*time.Second, func() error {
		pod, err := client.CoreV1().Pods("default").Get(ctx, "bb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				ready++
			}
		}
		if ready != 3 {
			return fmt.Errorf("pod phase %s, %d of 3 containers running", pod.Status.Phase, ready)
		}
		return nil
	})

	t.Run("logs", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			out, err := c.kubectlErr("logs", "bb", "-c", "main")
			if err != nil || !strings.Contains(out, "line-1\nline-2\n") {
				return fmt.Errorf("kubectl logs: %v: %q", err, out)
			}
			return nil
		})
		if out := c.kubectl("logs", "bb", "-c", "main", "--tail=1"); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "tick-") {
			t.Errorf("logs --tail=1: %q", out)
		}
		out := c.kubectl("logs", "bb", "-c", "main", "--timestamps", "--limit-bytes=40")
		if len(out) != 40 || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z line-1`).MatchString(out) {
			t.Errorf("logs --timestamps --limit-bytes=40: %q", out)
		}
		// Following sees lines written after it started.
		first := lastTick(t, c.kubectl("logs", "bb", "-c", "main"))
		want := fmt.Sprintf("tick-%d\n", first+2)
		followUntil(t, c, want, "logs", "-f", "bb", "-c", "main")
	})

	t.Run("log errors", func(t *testing.T) {
		for _, tc := range []struct{ path, want string }{
			{"/api/v1/namespaces/default/pods/bb/log", "a container name must be specified for pod bb, choose one of: [main web echo]"},
			{"/api/v1/namespaces/default/pods/bb/log?container=nope", `container "nope" in pod "bb" is not valid`},
			{"/api/v1/namespaces/default/pods/bb/log?container=main&tailLines=-1", "tailLines: Invalid value"},
		} {
			out, err := c.kubectlErr("get", "--raw", tc.path)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("GET %s: err %v, output %q, want it to mention %q", tc.path, err, out, tc.want)
			}
		}
	})

	for _, proto := range []struct {
		name string
		env  []string
	}{
		{"websocket", nil},
		{"spdy", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		t.Run("kubectl over "+proto.name, func(t *testing.T) {
			out, code := kubectlEnv(t, c, proto.env, "", "exec", "bb", "-c", "main", "--", "echo", "hi")
			if code != 0 || out != "hi\n" {
				t.Errorf("exec echo hi: exit %d, %q", code, out)
			}
			out, code = kubectlEnv(t, c, proto.env, "", "exec", "bb", "-c", "main", "--", "sh", "-c", "exit 3")
			if code != 3 {
				t.Errorf("exec exit 3: exit code %d, output %q", code, out)
			}
			out, code = kubectlEnv(t, c, proto.env, "some input\n", "exec", "-i", "bb", "-c", "main", "--", "cat")
			if code != 0 || out != "some input\n" {
				t.Errorf("exec -i cat: exit %d, %q", code, out)
			}
			attachEcho(t, c, proto.env, "ping-"+proto.name)
			portForward(t, c, proto.env)
		})
	}

	t.Run("client-go without fallback", func(t *testing.T) {
		execURL := client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("bb").SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "main", Command: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", execURL.String())
		if err != nil {
			t.Fatal(err)
		}
		spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", execURL)
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range map[string]remotecommand.Executor{"websocket": ws, "spdy": spdyExec} {
			var stdout, stderr bytes.Buffer
			err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
			var exitErr utilexec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 7 || stdout.String() != "out\n" || stderr.String() != "err\n" {
				t.Errorf("%s exec: err %v, stdout %q, stderr %q", name, err, stdout.String(), stderr.String())
			}
		}
		// A terminal of the size the client sets.
		ttyURL := client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("bb").SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "main", Stdout: true, TTY: true, Command: []string{"sh", "-c",
				`for i in $(seq 50); do s=$(stty size); [ "$s" = "40 100" ] && break; sleep 0.1; done; echo "size:$s"`}}, scheme.ParameterCodec).URL()
		wsTTY, err := remotecommand.NewWebSocketExecutor(cfg, "GET", ttyURL.String())
		if err != nil {
			t.Fatal(err)
		}
		spdyTTY, err := remotecommand.NewSPDYExecutor(cfg, "POST", ttyURL)
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range map[string]remotecommand.Executor{"websocket": wsTTY, "spdy": spdyTTY} {
			var stdout bytes.Buffer
			sizes := make(chan remotecommand.TerminalSize, 1)
			sizes <- remotecommand.TerminalSize{Width: 100, Height: 40}
			close(sizes)
			err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Tty: true, TerminalSizeQueue: sizeQueue(sizes)})
			if err != nil || !strings.Contains(stdout.String(), "size:40 100") {
				t.Errorf("%s exec with a terminal: err %v, output %q", name, err, stdout.String())
			}
		}

		pfURL := client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("bb").SubResource("portforward").URL()
		tunnel, err := portforward.NewSPDYOverWebsocketDialer(pfURL, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPortForwardDialer(t, tunnel)
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPortForwardDialer(t, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", pfURL))
	})

	t.Run("node proxy", func(t *testing.T) {
		var pods v1.PodList
		if err := json.Unmarshal([]byte(c.kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/pods")), &pods); err != nil {
			t.Fatal(err)
		}
		if !hasPod(pods.Items, "bb") {
			t.Errorf("nodes/proxy/pods lacks bb: %d pods", len(pods.Items))
		}
		var summary struct {
			Node struct {
				NodeName string `json:"nodeName"`
			} `json:"node"`
			Pods []struct {
				PodRef     struct{ Name string } `json:"podRef"`
				Containers []struct {
					Name   string `json:"name"`
					Memory *struct {
						WorkingSetBytes *uint64 `json:"workingSetBytes"`
					} `json:"memory"`
				} `json:"containers"`
			} `json:"pods"`
		}
		if err := json.Unmarshal([]byte(c.kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")), &summary); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range summary.Pods {
			if p.PodRef.Name == "bb" && len(p.Containers) == 3 && p.Containers[0].Memory != nil && p.Containers[0].Memory.WorkingSetBytes != nil {
				found = true
			}
		}
		if summary.Node.NodeName != node || !found {
			t.Errorf("stats/summary: node %q, pods %+v", summary.Node.NodeName, summary.Pods)
		}
		metrics := c.kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/metrics/resource")
		if !strings.Contains(metrics, `container_memory_working_set_bytes{container="main",namespace="default",pod="bb"}`) {
			t.Errorf("metrics/resource lacks the main container:\n%s", metrics)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		ca := x509.NewCertPool()
		caPEM, err := os.ReadFile(filepath.Join(dataDir, "tls", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		ca.AppendCertsFromPEM(caPEM)
		certOf := func(name string) []tls.Certificate {
			pair, err := tls.LoadX509KeyPair(filepath.Join(dataDir, "tls", name+".crt"), filepath.Join(dataDir, "tls", name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			return []tls.Certificate{pair}
		}
		// The server's own node joined by token: its certificate came through a CSR
		// and lives with the kubelet, as upstream's kubelet-client-current.pem.
		nodeCert := func() []tls.Certificate {
			pem := filepath.Join(datadir.Dir(dataDir).KubeletPKI(), "kubelet-client-current.pem")
			pair, err := tls.LoadX509KeyPair(pem, pem)
			if err != nil {
				t.Fatal(err)
			}
			return []tls.Certificate{pair}
		}
		apiserver := fmt.Sprintf("https://127.0.0.1:%d", c.port)
		kubelet := fmt.Sprintf("https://127.0.0.1:%d", kubeletPort)
		nodeIP := strings.TrimSpace(c.kubectl("get", "node", node, "-o", "jsonpath={.status.addresses[?(@.type=='InternalIP')].address}"))
		for _, tc := range []struct {
			name  string
			url   string
			certs []tls.Certificate
			want  int
		}{
			{"apiserver, no certificate (system:anonymous)", apiserver + "/api/v1/namespaces/default/pods/bb/log?container=main", nil, http.StatusForbidden},
			{"apiserver exec, no certificate (system:anonymous)", apiserver + "/api/v1/namespaces/default/pods/bb/exec?container=main&command=true&stdout=true", nil, http.StatusForbidden},
			{"kubelet, no certificate", kubelet + "/containerLogs/default/bb/main", nil, http.StatusUnauthorized},
			{"kubelet, a node's certificate", kubelet + "/containerLogs/default/bb/main", nodeCert(), http.StatusForbidden},
			{"kubelet, the apiserver's certificate", kubelet + "/containerLogs/default/bb/main", certOf("apiserver-kubelet-client"), http.StatusOK},
			{"kubelet pods, the apiserver's certificate", kubelet + "/pods", certOf("apiserver-kubelet-client"), http.StatusOK},
			{"kubelet healthz, a cluster admin", kubelet + "/healthz", certOf("admin"), http.StatusOK},
		} {
			// The kubelet's serving certificate came through a CSR for the node's own
			// addresses: dialled on loopback, it is checked against the node's InternalIP.
			serverName := ""
			if strings.HasPrefix(tc.url, kubelet) {
				serverName = nodeIP
			}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca, Certificates: tc.certs, ServerName: serverName}}}
			resp, err := hc.Get(tc.url)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.want, body)
			}
		}
	})
}

// buildPause builds the sandbox program next to the mizzen binary, where `mizzen server`
// cleanupHost removes what the agent leaves on the host: pods outlive the kubelet and
// containerd by design, so they are removed while the runtime still runs; then the
// server stops, and the pod network's bridge, its masquerade rule and any mount left
// under the data directory go.
func cleanupHost(t *testing.T, c *cluster, dataDir, bridge string) {
	_, _ = c.kubectlErr("delete", "pod", "--all", "--wait=true", "--timeout=60s")
	rt := containerd.Options{DataDir: filepath.Join(dataDir, "agent", "containerd")}
	if err := containerd.RemoveAllPods(context.Background(), rt); err != nil {
		t.Logf("removing pods: %v", err)
	}
	c.stop()
	cleanupNode(t, dataDir, bridge)
}

// kubectlEnv runs kubectl with extra environment and stdin, returning its output and
// exit code.
func kubectlEnv(t *testing.T, c *cluster, env []string, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mizzenBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), 0
	case errors.As(err, &exitErr):
		t.Logf("kubectl %s: %v; stderr: %s", strings.Join(args, " "), err, stderr.String())
		return stdout.String(), exitErr.ExitCode()
	}
	t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	return "", -1
}

// startKubectl starts a long-running kubectl whose stdout is read line by line.
func startKubectl(t *testing.T, c *cluster, env []string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(mizzenBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin, bufio.NewScanner(stdout), &stderr
}

// scanFor reads lines until one satisfies match, failing after timeout.
func scanFor(t *testing.T, sc *bufio.Scanner, stderr *bytes.Buffer, timeout time.Duration, what string, match func(string) bool) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if match(sc.Text()) {
				found <- sc.Text()
				return
			}
		}
		close(found)
	}()
	select {
	case line, ok := <-found:
		if !ok {
			t.Fatalf("output ended without %s; stderr: %s", what, stderr.String())
		}
		return line
	case <-time.After(timeout):
		t.Fatalf("no %s after %v; stderr: %s", what, timeout, stderr.String())
	}
	return ""
}

func followUntil(t *testing.T, c *cluster, want string, args ...string) {
	t.Helper()
	cmd, _, sc, stderr := startKubectl(t, c, nil, args...)
	scanFor(t, sc, stderr, 30*time.Second, strconv.Quote(want), func(line string) bool { return line+"\n" == want })
	_ = cmd.Process.Kill()
}

// lastTick is the highest tick-N in a log.
func lastTick(t *testing.T, log string) int {
	t.Helper()
	n := 0
	for _, m := range regexp.MustCompile(`tick-(\d+)`).FindAllStringSubmatch(log, -1) {
		if v, _ := strconv.Atoi(m[1]); v > n {
			n = v
		}
	}
	return n
}

// attachEcho attaches to the echo container, sends a line and sees the answer.
func attachEcho(t *testing.T, c *cluster, env []string, word string) {
	t.Helper()
	cmd, stdin, sc, stderr := startKubectl(t, c, env, "attach", "-i", "bb", "-c", "echo")
	// The answer only comes once the attach is established: send until it does.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			_, _ = io.WriteString(stdin, word+"\n")
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	scanFor(t, sc, stderr, 30*time.Second, "the echoed "+word, func(line string) bool { return line == "got:"+word })
	_ = cmd.Process.Kill()
}

// portForward forwards a local port to the pod's httpd and fetches its page.
func portForward(t *testing.T, c *cluster, env []string) {
	t.Helper()
	cmd, _, sc, stderr := startKubectl(t, c, env, "port-forward", "pod/bb", ":8080")
	line := scanFor(t, sc, stderr, 30*time.Second, "the forwarding line", func(line string) bool { return strings.HasPrefix(line, "Forwarding from 127.0.0.1:") })
	m := regexp.MustCompile(`127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("port-forward said %q", line)
	}
	for i := 0; i < 2; i++ { // two connections through one forward
		body := mustGet(t, "http://127.0.0.1:"+m[1]+"/")
		if body != "hello-from-pod\n" {
			t.Errorf("through port-forward: %q; stderr: %s", body, stderr.String())
		}
	}
	_ = cmd.Process.Kill()
}

// mustGet fetches u, failing the test (not stopping it) on an error.
func mustGet(t *testing.T, u string) string {
	t.Helper()
	body, err := httpGet(u)
	if err != nil {
		t.Errorf("GET %s: %v", u, err)
	}
	return body
}

// checkPortForwardDialer forwards a local port with one dialer and fetches the pod's
// page through it.
func checkPortForwardDialer(t *testing.T, dialer httpstream.Dialer) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	var out, errOut bytes.Buffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() { failed <- pf.ForwardPorts() }()
	defer close(stop)
	select {
	case <-ready:
	case err := <-failed:
		t.Fatalf("port-forward: %v; %s", err, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("port-forward not ready; %s", errOut.String())
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports %v: %v", ports, err)
	}
	if body := mustGet(t, fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local)); body != "hello-from-pod\n" {
		t.Errorf("through port-forward: %q; %s", body, errOut.String())
	}
}

// sizeQueue hands out terminal sizes until its channel closes.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q
	if !ok {
		return nil
	}
	return &size
}

func hasPod(pods []v1.Pod, name string) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

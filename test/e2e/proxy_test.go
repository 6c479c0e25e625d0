package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Network of the service proxy test's cluster: distinct from other clusters on this host.
const (
	proxyClusterCIDR = "10.219.0.0/16"
	proxyBridge      = "mzn-svcproxy"
)

// proxyObjects are two netexec backends behind a NodePort service, a service selecting
// only the first (for a pod reaching itself), a service without endpoints, and a
// client pod.
const proxyObjects = `apiVersion: v1
kind: Pod
metadata: {name: backend-1, labels: {app: backend, name: backend-1}}
spec:
  containers:
  - name: netexec
    image: mizzen.local/agnhost:v1
    args: ["netexec", "--http-port=8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: backend-2, labels: {app: backend, name: backend-2}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: netexec
    image: mizzen.local/agnhost:v1
    args: ["netexec", "--http-port=8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: mizzen.local/busybox:v1
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  type: NodePort
  selector: {app: backend}
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: first}
spec:
  selector: {name: backend-1}
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: nothing}
spec:
  selector: {app: nothing}
  ports:
  - {port: 80, targetPort: 8080}
`

// TestServiceProxy runs a cluster whose bundled agent runs the service proxy, and
// reaches pods through Services from a pod and from the host.
func TestServiceProxy(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar", "busybox.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", proxyClusterCIDR, "--pod-bridge", proxyBridge,
		"--kubelet-port", strconv.Itoa(freePort(t)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		cleanupHost(t, c, dataDir, proxyBridge)
	})

	c.kubectlStdin(proxyObjects, "apply", "-f", "-")
	for _, name := range []string{"backend-1", "backend-2", "client"} {
		c.waitPod("default", name, 180*time.Second, runningAndReady)
	}
	jsonpath := func(expr string, args ...string) string {
		return strings.TrimSpace(c.kubectl(append(args, "-o", "jsonpath="+expr)...))
	}
	clusterIP := func(svc string) string { return jsonpath("{.spec.clusterIP}", "get", "service", svc) }
	backendIP, firstIP, nothingIP := clusterIP("backend"), clusterIP("first"), clusterIP("nothing")
	nodePort := jsonpath("{.spec.ports[0].nodePort}", "get", "service", "backend")
	nodeIP := jsonpath(`{.items[0].status.addresses[?(@.type=="InternalIP")].address}`, "get", "nodes")
	clientPodIP := jsonpath("{.status.podIP}", "get", "pod", "client")
	t.Logf("backend %s, first %s, nothing %s, NodePort %s:%s", backendIP, firstIP, nothingIP, nodeIP, nodePort)

	// fromPod fetches a netexec path through kubectl exec and busybox wget (whose own
	// -T timeout crashes in Debian's static build, hence timeout).
	fromPod := func(pod, url string) (string, error) {
		out, err := c.kubectlErr("exec", pod, "--", "timeout", "10", "wget", "-qO-", url)
		return strings.TrimSpace(out), err
	}
	// reachesBoth polls fetch until both backends answered /hostname.
	reachesBoth := func(what string, fetch func() (string, error)) {
		t.Helper()
		seen := map[string]bool{}
		eventually(t, 60*time.Second, func() error {
			name, err := fetch()
			if err != nil {
				return err
			}
			if name != "backend-1" && name != "backend-2" {
				return fmt.Errorf("%s answered %q", what, name)
			}
			seen[name] = true
			if len(seen) < 2 {
				return fmt.Errorf("%s reached only %v so far", what, seen)
			}
			return nil
		})
	}

	t.Run("pod to ClusterIP", func(t *testing.T) {
		reachesBoth("ClusterIP from the client pod", func() (string, error) {
			return fromPod("client", "http://"+backendIP+"/hostname")
		})
		// Pod traffic keeps its source: the backend sees the client pod's address.
		got, err := fromPod("client", "http://"+backendIP+"/clientip")
		if err != nil {
			t.Fatal(err)
		}
		if host, _, _ := net.SplitHostPort(got); host != clientPodIP {
			t.Errorf("backend saw client %q, want the client pod's %s", got, clientPodIP)
		}
	})
	t.Run("pod to its own service (hairpin)", func(t *testing.T) {
		got, err := fromPod("backend-1", "http://"+firstIP+"/hostname")
		if err != nil || got != "backend-1" {
			t.Fatalf("backend-1 through its own service: %q, %v", got, err)
		}
	})
	t.Run("host to NodePort and ClusterIP", func(t *testing.T) {
		reachesBoth("the NodePort from the host", func() (string, error) {
			return httpGet("http://" + net.JoinHostPort(nodeIP, nodePort) + "/hostname")
		})
		got, err := httpGet("http://" + backendIP + "/hostname")
		if err != nil || !strings.HasPrefix(got, "backend-") {
			t.Fatalf("ClusterIP from the host: %q, %v", got, err)
		}
	})
	t.Run("a service without endpoints refuses", func(t *testing.T) {
		out, err := fromPod("client", "http://"+nothingIP+"/hostname")
		if err == nil || !strings.Contains(out, "refused") {
			t.Errorf("from a pod: %q, %v; want connection refused", out, err)
		}
		if _, err := net.DialTimeout("tcp", net.JoinHostPort(nothingIP, "80"), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("from the host: %v; want connection refused", err)
		}
	})
	t.Run("pod to service by name, through cluster DNS", func(t *testing.T) {
		// The bundle's DNS is the kube-dns Service; the kubelet wrote it, with the
		// search path, into the pod's resolv.conf.
		resolv := c.kubectl("exec", "client", "--", "cat", "/etc/resolv.conf")
		if !strings.Contains(resolv, "nameserver 10.96.0.10") || !strings.Contains(resolv, "search default.svc.cluster.local svc.cluster.local cluster.local") {
			t.Errorf("the client pod's resolv.conf:\n%s", resolv)
		}
		reachesBoth("the service by its short name", func() (string, error) {
			return fromPod("client", "http://backend/hostname")
		})
		out := c.kubectl("exec", "client", "--", "nslookup", "kubernetes.default.svc.cluster.local")
		if !strings.Contains(out, "Address: "+clusterIP("kubernetes")) {
			t.Errorf("nslookup kubernetes.default.svc.cluster.local:\n%s", out)
		}
	})
	t.Run("a deleted backend gets no new connections", func(t *testing.T) {
		c.kubectl("delete", "pod", "backend-2", "--wait=true", "--timeout=60s")
		eventually(t, 30*time.Second, func() error {
			slices := c.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=backend",
				"-o", "jsonpath={.items[*].endpoints[*].targetRef.name}")
			if strings.Contains(slices, "backend-2") {
				return fmt.Errorf("endpoints still list backend-2: %s", slices)
			}
			return nil
		})
		// The proxy follows within its minimum sync period; then only backend-1 answers.
		eventually(t, 30*time.Second, func() error {
			for range 10 {
				name, err := httpGet("http://" + net.JoinHostPort(nodeIP, nodePort) + "/hostname")
				if err != nil {
					return err
				}
				if name != "backend-1" {
					return fmt.Errorf("reached %q", name)
				}
			}
			return nil
		})
	})
}

// TestProxyStandalone runs `mizzen proxy` on its own against a control plane without
// nodes, with a table of its own, and watches the rules follow a Service and its
// EndpointSlice; the rules outlive the proxy until `--cleanup`.
func TestProxyStandalone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writing nftables rules needs root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("the nft tool is needed to look at the rules")
	}
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent")
	table := fmt.Sprintf("mzp-e2e-%d", os.Getpid())
	listTable := func() (string, error) {
		out, err := exec.Command("nft", "list", "table", "ip", table).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _ = exec.Command(mizzenBin, "proxy", "--cleanup", "--nftables-table", table).Run() })
	healthz := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProcess(t, "proxy", "--kubeconfig", c.kubeconfig, "--hostname-override", "standalone-node",
		"--nftables-table", table, "--healthz-bind-address", healthz)

	c.kubectlStdin(`apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports:
  - {name: http, port: 80}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-manual
  labels: {kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: e2e-test}
addressType: IPv4
ports:
- {name: http, port: 8080, protocol: TCP}
endpoints:
- addresses: ["198.51.100.7"]
`, "apply", "-f", "-")
	ip := strings.TrimSpace(c.kubectl("get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"))
	eventually(t, 30*time.Second, func() error {
		rules, err := listTable()
		if err != nil || !strings.Contains(rules, ip+" . tcp . 80 : goto service-") || !strings.Contains(rules, "dnat to 198.51.100.7:8080") {
			return fmt.Errorf("rules for %s not there yet (%v):\n%s\nproxy log:\n%s", ip, err, rules, p.log.String())
		}
		return nil
	})
	if body, err := httpGet("http://" + healthz + "/healthz"); err != nil || !strings.Contains(body, `"lastUpdated"`) {
		t.Errorf("/healthz: %q, %v", body, err)
	}

	c.kubectl("delete", "endpointslice", "web-manual")
	eventually(t, 30*time.Second, func() error {
		rules, err := listTable()
		if err != nil || !strings.Contains(rules, ip+" . tcp . 80 : goto reject-chain") || strings.Contains(rules, "198.51.100.7") {
			return fmt.Errorf("service %s not rejecting yet (%v):\n%s", ip, err, rules)
		}
		return nil
	})

	// A stopped proxy leaves its rules, as upstream's; --cleanup removes them.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("proxy exit: %v\n%s", err, p.log.String())
	}
	if _, err := listTable(); err != nil {
		t.Fatalf("the table went with the proxy: %v", err)
	}
	if out, err := exec.Command(mizzenBin, "proxy", "--cleanup", "--nftables-table", table).CombinedOutput(); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	if rules, err := listTable(); err == nil {
		t.Fatalf("the table is still there after --cleanup:\n%s", rules)
	}
}

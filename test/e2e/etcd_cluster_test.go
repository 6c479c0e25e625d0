package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/etcd"
	"mizzen/internal/pki"
	"mizzen/internal/testing/lockedbuf"
)

// process is a mizzen subcommand running for a test.
type process struct {
	cmd *exec.Cmd
	log lockedbuf.Buffer
}

func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	p := launch(t, args...)
	t.Cleanup(p.kill)
	return p
}

// launch starts a process the caller stops. When the test fails, the end of the
// process's log is printed, so a process that died or never became ready says why.
func launch(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(mizzenBin, args...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of mizzen %s (pid %d, %s):\n%s", strings.Join(args, " "), p.cmd.Process.Pid, p.state(), tail(p.log.String(), 300))
		}
	})
	return p
}

// state says whether the process has exited, and how.
func (p *process) state() string {
	if p.cmd.ProcessState == nil {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// etcdCluster is three `mizzen etcd` members and two apiservers sharing them, every
// connection between them mutual TLS with certificates of the cluster's etcd CA.
type etcdCluster struct {
	members    []*process
	memberArgs [][]string
	clientURLs []string
	// client is the etcd CA and a client certificate of it.
	client *etcd.TLSFiles
	a, b   *kubernetes.Clientset
}

// writeIssued writes a certificate and its key as dir/name.{crt,key}.
func writeIssued(t *testing.T, dir, name string, issued *pki.Issued, err error) (cert, key string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cert, issued.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, issued.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func startEtcdCluster(t *testing.T) *etcdCluster {
	t.Helper()
	base := t.TempDir()
	certs := filepath.Join(base, "etcd-pki")
	ca, err := pki.LoadOrCreateCA(certs, "etcd-ca", "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(certs, "etcd-ca.crt")
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	issued, err := ca.IssueClient("kube-apiserver-etcd-client", nil)
	clientCert, clientKey := writeIssued(t, certs, "apiserver-etcd-client", issued, err)
	ec := &etcdCluster{client: &etcd.TLSFiles{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}}
	var peers, names []string
	for i := 0; i < 3; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
		ec.clientURLs = append(ec.clientURLs, fmt.Sprintf("https://127.0.0.1:%d", freePort(t)))
		peers = append(peers, fmt.Sprintf("https://127.0.0.1:%d", freePort(t)))
	}
	var initial []string
	for i := range names {
		initial = append(initial, names[i]+"="+peers[i])
	}
	for i := range names {
		args := []string{"etcd", "--name", names[i], "--data-dir", filepath.Join(base, names[i]),
			"--listen-client-urls", ec.clientURLs[i], "--listen-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new"}
		issued, err := ca.IssueServing(names[i], []string{"localhost"}, loopback)
		cert, key := writeIssued(t, certs, names[i]+"-server", issued, err)
		args = append(args, "--cert-file", cert, "--key-file", key, "--trusted-ca-file", caFile)
		issued, err = ca.IssuePeer(names[i], []string{"localhost"}, loopback)
		cert, key = writeIssued(t, certs, names[i]+"-peer", issued, err)
		args = append(args, "--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", caFile)
		ec.memberArgs = append(ec.memberArgs, args)
		ec.members = append(ec.members, startProcess(t, args...))
	}
	servers := strings.Join(ec.clientURLs, ",")
	etcdTLS := []string{"--etcd-cafile", caFile, "--etcd-certfile", clientCert, "--etcd-keyfile", clientKey}

	// The first apiserver makes the cluster CA; the second shares it.
	dirA, dirB := filepath.Join(base, "a"), filepath.Join(base, "b")
	portA, portB := freePort(t), freePort(t)
	startProcess(t, append([]string{"apiserver", "--etcd-servers", servers, "--data-dir", dirA, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(portA)}, etcdTLS...)...)
	ec.a = waitReady(t, filepath.Join(dirA, "admin.kubeconfig"))
	copyFile(t, filepath.Join(dirA, "tls", "ca.crt"), filepath.Join(dirB, "tls", "ca.crt"))
	copyFile(t, filepath.Join(dirA, "tls", "ca.key"), filepath.Join(dirB, "tls", "ca.key"))
	startProcess(t, append([]string{"apiserver", "--etcd-servers", servers, "--data-dir", dirB, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(portB)}, etcdTLS...)...)
	ec.b = waitReady(t, filepath.Join(dirB, "admin.kubeconfig"))
	return ec
}

// TestExternalEtcdCluster: two apiservers share a three-member etcd cluster of
// `mizzen etcd` processes. Cluster IPs are never handed out twice even when both
// allocate at once, each sees the other's writes, and losing one etcd member loses
// nothing.
func TestExternalEtcdCluster(t *testing.T) {
	sideBySide(t)
	ec := startEtcdCluster(t)
	members, a, b := ec.members, ec.a, ec.b
	for _, args := range ec.memberArgs {
		for i, arg := range args {
			if arg == "--listen-client-urls" || arg == "--listen-peer-urls" {
				refusesWithoutCertificate(t, strings.TrimPrefix(args[i+1], "https://"), ec.client.CAFile)
			}
		}
	}

	ctx := context.Background()
	const perServer = 40
	var mu sync.Mutex
	ips := map[string]string{}
	var wg sync.WaitGroup
	for si, c := range []*kubernetes.Clientset{a, b} {
		for i := 0; i < perServer; i++ {
			wg.Add(1)
			go func(si, i int, c *kubernetes.Clientset) {
				defer wg.Done()
				name := fmt.Sprintf("svc-%d-%d", si, i)
				svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if other, dup := ips[svc.Spec.ClusterIP]; dup {
					t.Errorf("cluster IP %s given to both %s and %s", svc.Spec.ClusterIP, other, name)
				}
				ips[svc.Spec.ClusterIP] = name
			}(si, i, c)
		}
	}
	wg.Wait()
	if len(ips) != 2*perServer {
		t.Fatalf("%d distinct cluster IPs for %d services", len(ips), 2*perServer)
	}
	// Each apiserver sees what the other wrote.
	eventually(t, 10*time.Second, func() error {
		list, err := b.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 2*perServer+1 {
			return fmt.Errorf("apiserver b lists %d services", len(list.Items))
		}
		return nil
	})

	// One etcd member down: the other two still form a quorum. If the lost member led,
	// writes fail until the others elect a leader, so the write is retried meanwhile.
	members[2].kill()
	eventually(t, 30*time.Second, func() error {
		_, err := a.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-member-loss"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt timed out after all but was written
		}
		return err
	})
	eventually(t, 10*time.Second, func() error {
		_, err := b.CoreV1().ConfigMaps("default").Get(ctx, "after-member-loss", metav1.GetOptions{})
		return err
	})
}

// startMembers starts three `mizzen etcd` members on loopback ports, their data under
// base; restarting member i is startProcess(t, ec.memberArgs[i]...).
func (ec *etcdCluster) startMembers(t *testing.T, base string) {
	t.Helper()
	var peers, names []string
	for i := 0; i < 3; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
		ec.clientURLs = append(ec.clientURLs, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	}
	var initial []string
	for i := range names {
		initial = append(initial, names[i]+"="+peers[i])
	}
	for i := range names {
		args := []string{"etcd", "--name", names[i], "--data-dir", filepath.Join(base, "etcd-"+names[i]),
			"--listen-client-urls", ec.clientURLs[i], "--listen-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new"}
		ec.memberArgs = append(ec.memberArgs, args)
		ec.members = append(ec.members, startProcess(t, args...))
	}
}

func waitReady(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	var client *kubernetes.Clientset
	eventually(t, 60*time.Second, func() error {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 500, 1000
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err != nil || string(body) != "ok" {
			return fmt.Errorf("not ready: %v %s", err, body)
		}
		client = c
		return nil
	})
	return client
}

// refusesWithoutCertificate checks that the TLS endpoint at hostPort (an etcd member's
// client or peer port) serves a certificate of the CA in caFile and refuses a client
// without a certificate of its own, and that it does not speak plain HTTP.
func refusesWithoutCertificate(t *testing.T, hostPort, caFile string) {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	host, _, _ := net.SplitHostPort(hostPort)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", hostPort, &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		t.Fatalf("%s: no TLS with a certificate of the etcd CA: %v", hostPort, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = conn.Write([]byte("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 512)
	if n, err := conn.Read(buf); err == nil {
		t.Errorf("%s answered a client without a certificate: %q", hostPort, buf[:n])
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + hostPort + "/version"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Errorf("%s answered plain HTTP", hostPort)
	}
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/jointoken"
	"mizzen/internal/pki"
	"mizzen/internal/testing/netlab"
	"mizzen/internal/testing/proc"
)

// haPort is the apiserver's port inside each machine (its own network namespace).
const haPort = 16443

// haServer is one `mizzen server` of a cluster of servers, in its own machine.
type haServer struct {
	t       *testing.T
	machine *netlab.Machine
	dataDir string
	args    []string
	cmd     *exec.Cmd
	log     *bytes.Buffer
}

func (s *haServer) url() string {
	return "https://" + s.machine.Addr.String() + ":" + strconv.Itoa(haPort)
}

func (s *haServer) start() {
	s.t.Helper()
	s.log = &bytes.Buffer{}
	s.cmd = s.machine.Command(context.Background(), mizzenBin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	eventually(s.t, 120*time.Second, func() error {
		if s.cmd.ProcessState != nil {
			return nil
		}
		out, err := s.kubectlErr("get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(out) != "ok" {
			return fmt.Errorf("%s not ready: %v %s\nlog:\n%s", s.machine.Name, err, out, lastLines(s.log.String(), 20))
		}
		return nil
	})
}

func (s *haServer) stop() { proc.Stop(s.cmd, 20*time.Second) }

func (s *haServer) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// kubectlErr runs kubectl from the host against this server's address.
func (s *haServer) kubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mizzenBin, append([]string{"kubectl", "--kubeconfig", filepath.Join(s.dataDir, "admin.kubeconfig"), "--server", s.url()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (s *haServer) client() kubernetes.Interface {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags(s.url(), filepath.Join(s.dataDir, "admin.kubeconfig"))
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// haArgs are the flags of a server of the test's cluster: this test's bridge and
// CIDRs, no agent (the machines share the host's hostname and mounts).
func haArgs(dataDir string, extra ...string) []string {
	return append([]string{"server", "--data-dir", dataDir, "--secure-port", strconv.Itoa(haPort),
		"--disable", "agent,ingress,dashboard", "--controller-manager-secure-port", "0",
		"--pod-bridge", "mznh0", "--cluster-cidr", "10.156.0.0/16", "--service-cluster-ip-range", "10.70.0.0/16",
		"--etcd-disable-snapshots"}, extra...)
}

// etcdMembers lists the etcd cluster's members through the first live server's
// member, with the cluster's etcd client certificate.
func etcdMembers(t *testing.T, servers []*haServer) (voters, learners []string, term uint64) {
	t.Helper()
	for _, s := range servers {
		if s.cmd.ProcessState != nil {
			continue
		}
		ep := "https://" + s.machine.Addr.String() + ":2379"
		cli, err := etcd.Dial(context.Background(), ep, etcdsnapshot.EmbeddedClientFiles(datadir.Dir(s.dataDir)))
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, err := cli.MemberList(ctx)
		if err != nil {
			continue
		}
		for _, m := range list.Members {
			if m.IsLearner {
				learners = append(learners, m.Name)
			} else {
				voters = append(voters, m.Name)
			}
		}
		if st, err := cli.Status(ctx, ep); err == nil {
			term = st.RaftTerm
		}
		return voters, learners, term
	}
	t.Fatal("no server's etcd answers")
	return
}

// TestSeveralServers: three servers, each in its own network namespace, form one
// cluster (--cluster-init, then --server/--token): every etcd connection between
// them is mutual TLS, each runs its own apiserver, and the kubernetes Service lists
// all three. Bad joins change nothing. A server killed with SIGKILL while a client
// writes through another costs the writers at most one election; restarted with the
// same flags it rejoins, and every server then shows every acknowledged write.
func TestSeveralServers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	lab, err := netlab.New("mznh", "10.250.156.0/24", 3)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	var servers []*haServer
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	for i, m := range lab.Machines {
		servers = append(servers, &haServer{t: t, machine: m, dataDir: filepath.Join(base, fmt.Sprintf("server-%d", i+1))})
	}
	first := servers[0]
	first.args = haArgs(first.dataDir, "--cluster-init")
	first.start()
	out, err := first.machine.Run(context.Background(), mizzenBin, "token", "create", "--role", "server", "--data-dir", first.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)

	// Bad joins, from the third machine before its server exists: each fails with a
	// clear error and the cluster's members stay as they were.
	badJoins(t, lab.Machines[2], base, first, token)

	for _, s := range servers[1:] {
		s.args = haArgs(s.dataDir, "--server", first.url(), "--token", token)
		s.start()
	}
	// Between machines etcd speaks only mutual TLS of the cluster's etcd CA.
	etcdCA := filepath.Join(datadir.Dir(first.dataDir).EtcdTLS(), "server-ca.crt")
	for _, s := range servers {
		refusesWithoutCertificate(t, s.machine.Addr.String()+":2379", etcdCA)
		refusesWithoutCertificate(t, s.machine.Addr.String()+":2380", etcdCA)
	}
	voters, learners, _ := etcdMembers(t, servers)
	t.Logf("three servers: etcd voters %v", voters)
	if len(voters) != 3 || len(learners) != 0 {
		t.Fatalf("etcd members: voters %v learners %v, want 3 voters", voters, learners)
	}
	// Every server in the kubernetes Service's endpoints.
	eventually(t, 30*time.Second, func() error {
		out, err := first.kubectlErr("get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[*].addresses[*].ip}")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, s := range servers {
			if !slices.Contains(strings.Fields(out), s.machine.Addr.String()) {
				return fmt.Errorf("kubernetes endpoints %q lack %s", out, s.machine.Addr)
			}
		}
		return nil
	})
	// The scheduler and the controller-manager run on every server, one of each leading.
	for _, lease := range []string{"kube-scheduler", "kube-controller-manager"} {
		eventually(t, 60*time.Second, func() error {
			out, err := servers[2].kubectlErr("get", "lease", "-n", "kube-system", lease, "-o", "jsonpath={.spec.holderIdentity}")
			if err != nil || strings.TrimSpace(out) == "" {
				return fmt.Errorf("lease %s: %v %s", lease, err, out)
			}
			return nil
		})
	}

	// Kill the first server (the etcd leader since it founded the cluster, unless an
	// election moved it) while writing through the second, then a joined one while
	// writing through the first.
	acked := killDuringWrites(t, servers, servers[0], servers[1])
	acked = append(acked, killDuringWrites(t, servers, servers[2], servers[0])...)
	// kubectl against every server sees every acknowledged write.
	for _, s := range servers {
		out, err := s.kubectlErr("get", "configmaps", "-n", "default", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl against %s: %v %s", s.machine.Name, err, out)
		}
		have := map[string]bool{}
		for _, line := range strings.Fields(out) {
			have[strings.TrimPrefix(line, "configmap/")] = true
		}
		for _, name := range acked {
			if !have[name] {
				t.Errorf("kubectl against %s: acknowledged write %s missing", s.machine.Name, name)
			}
		}
	}

	// A server leaving: stopped, then --remove; the others forget its member.
	leaving := servers[2]
	leaving.stop()
	if out, err := leaving.machine.Run(context.Background(), mizzenBin, "server", "--remove", "--data-dir", leaving.dataDir); err != nil {
		t.Fatalf("--remove: %v %s", err, out)
	}
	voters, _, _ = etcdMembers(t, servers)
	if len(voters) != 2 {
		t.Errorf("after --remove, voters %v, want 2", voters)
	}
	// A live server cannot remove its own member, nor one the cluster does not have.
	own, err := os.ReadFile(datadir.Dir(first.dataDir).EtcdMember())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"no-such-member", strings.Split(strings.Split(string(own), `"name": "`)[1], `"`)[0]} {
		if out, err := first.machine.Run(context.Background(), mizzenBin, "server", "--remove-member", name, "--data-dir", first.dataDir); err == nil {
			t.Errorf("--remove-member %s succeeded: %s", name, out)
		}
	}
	if _, err := servers[0].client().CoreV1().ConfigMaps("default").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-remove"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("write after --remove: %v", err)
	}
}

// badJoins tries joins that must fail with a clear error and change nothing.
func badJoins(t *testing.T, m *netlab.Machine, base string, first *haServer, token string) {
	t.Helper()
	ctx := context.Background()
	other, err := pki.LoadOrCreateCA(filepath.Join(base, "other-ca"), "ca", "other")
	if err != nil {
		t.Fatal(err)
	}
	otherToken, _ := jointoken.Generate(other.CertPEM)
	good, _ := jointoken.Parse(token)
	wrong := good
	wrong.Secret = strings.Repeat("0", 16)
	agentToken, err := first.machine.Run(ctx, mizzenBin, "token", "create", "--role", "agent", "--data-dir", first.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	otherCluster := filepath.Join(base, "bad-other-cluster")
	if err := os.MkdirAll(filepath.Join(otherCluster, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(otherCluster, "tls", "ca.crt"), other.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _, _ := etcdMembers(t, []*haServer{first})
	for _, tc := range []struct {
		name, dir, token, want string
	}{
		{"wrong secret", filepath.Join(base, "bad-wrong"), wrong.String(), "secret is wrong"},
		{"agent token", filepath.Join(base, "bad-agent"), strings.TrimSpace(agentToken), "not servers"},
		{"another cluster's token", filepath.Join(base, "bad-token"), otherToken.String(), "does not match the token's CA hash"},
		{"data dir of another cluster", otherCluster, token, "another cluster's CA"},
	} {
		cmd := m.Command(ctx, mizzenBin, haArgs(tc.dir, "--server", first.url(), "--token", tc.token)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v, output %s; want an error saying %q", tc.name, err, out, tc.want)
		}
		if _, err := os.Stat(filepath.Join(tc.dir, "tls", "ca.key")); err == nil {
			t.Errorf("%s: the cluster's CA key was written to %s", tc.name, tc.dir)
		}
	}
	if after, _, _ := etcdMembers(t, []*haServer{first}); !slices.Equal(before, after) {
		t.Errorf("etcd members changed by bad joins: %v -> %v", before, after)
	}
}

// killDuringWrites writes ConfigMaps through via while victim is killed with SIGKILL
// and restarted with its flags unchanged. It checks writes resume after at most one
// etcd election and returns the acknowledged names.
func killDuringWrites(t *testing.T, servers []*haServer, victim, via *haServer) []string {
	t.Helper()
	client := via.client()
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	done := make(chan struct{})
	prefix := "w-" + victim.machine.Name + "-"
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := prefix + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	eventually(t, 30*time.Second, func() error {
		if count() < 5 {
			return fmt.Errorf("%d writes through %s", count(), via.machine.Name)
		}
		return nil
	})
	_, _, termBefore := etcdMembers(t, []*haServer{via})
	victim.kill()
	killedAt := count()
	eventually(t, 60*time.Second, func() error {
		if count() < killedAt+5 {
			return fmt.Errorf("writes through %s stalled at %d since %s was killed", via.machine.Name, count(), victim.machine.Name)
		}
		return nil
	})
	_, _, termAfter := etcdMembers(t, []*haServer{via})
	t.Logf("killed %s: writes through %s went on (%d acknowledged so far), etcd term %d -> %d", victim.machine.Name, via.machine.Name, count(), termBefore, termAfter)
	if termAfter > termBefore+1 {
		t.Errorf("etcd term went from %d to %d: more than one election after losing %s", termBefore, termAfter, victim.machine.Name)
	}
	victim.start()
	if victim.cmd.ProcessState != nil {
		t.Fatalf("%s did not restart: %s", victim.machine.Name, lastLines(victim.log.String(), 30))
	}
	close(stop)
	<-done
	voters, learners, _ := etcdMembers(t, servers)
	t.Logf("%s restarted with the same flags: etcd voters %v", victim.machine.Name, voters)
	if len(voters) != len(servers) || len(learners) != 0 {
		t.Errorf("after %s's restart: voters %v learners %v", victim.machine.Name, voters, learners)
	}
	return acked
}

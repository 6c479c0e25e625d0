package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/controlplane/nodemember"
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
	s.launch()
	s.waitReady()
}

// launch starts the server's process without waiting for it.
func (s *haServer) launch() {
	s.t.Helper()
	s.log = &bytes.Buffer{}
	s.cmd = s.machine.Command(context.Background(), mizzenBin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
}

// waitReady waits for the server's /readyz, or for its process to end.
func (s *haServer) waitReady() {
	s.t.Helper()
	eventually(s.t, 120*time.Second, func() error {
		if s.cmd.ProcessState != nil {
			return nil
		}
		out, err := s.kubectlErr("get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(out) != "ok" {
			return fmt.Errorf("%s not ready: %v %s\nlog:\n%s", s.machine.Name, err, out, tail(s.log.String(), 20))
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

// haArgs are the flags of a server of the test's cluster: this test's bridge and
// CIDRs, no agent (the machines share the host's hostname and mounts).
func haArgs(dataDir string, extra ...string) []string {
	return append([]string{"server", "--data-dir", dataDir, "--secure-port", strconv.Itoa(haPort),
		"--disable", "agent,ingress,dashboard", "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0",
		"--pod-bridge", "mzn-ha7", "--cluster-cidr", "10.180.0.0/16", "--service-cluster-ip-range", "10.70.0.0/16",
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
	sideBySide(t)
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	lab, err := netlab.New("mha7", "10.250.180.0/24", 3)
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
	// Every server in the kubernetes Service's endpoints, and its DNS and metrics
	// server in theirs, each serving.
	servicesList(t, first, servers, 60*time.Second)
	addonsServe(t, first)
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
	acked := killDuringWrites(t, servers, servers[0], servers[1], true)
	acked = append(acked, killDuringWrites(t, servers, servers[2], servers[0], false)...)
	// kubectl against every server sees every acknowledged write.
	for _, s := range servers {
		seesEveryWrite(t, s, acked)
	}

	// A cold restart of the whole cluster, as after a power cut: every server stopped
	// (SIGTERM), then all started again with their data; none is ready before a
	// quorum of members is back, so they start together.
	var stopping sync.WaitGroup
	for _, s := range servers {
		stopping.Go(s.stop)
	}
	stopping.Wait()
	for _, s := range servers {
		s.launch()
	}
	for _, s := range servers {
		s.waitReady()
		if s.cmd.ProcessState != nil {
			t.Fatalf("%s did not come back after the cold restart: %s", s.machine.Name, tail(s.log.String(), 30))
		}
	}
	voters, learners, _ = etcdMembers(t, servers)
	t.Logf("cold restart of all three servers: etcd voters %v", voters)
	if len(voters) != len(servers) || len(learners) != 0 {
		t.Errorf("after the cold restart: voters %v learners %v", voters, learners)
	}
	for _, s := range servers {
		if _, err := s.client().CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-cold-restart-" + s.machine.Name}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("write through %s after the cold restart: %v", s.machine.Name, err)
		}
		acked = append(acked, "after-cold-restart-"+s.machine.Name)
	}
	for _, s := range servers {
		seesEveryWrite(t, s, acked)
	}

	// A server leaving: stopped, then its Node deleted (`kubectl delete node`): the
	// server holding the removal Lease removes its etcd member. The machines here run
	// no agent, so the Node is registered by hand as its server marks it.
	leaving := servers[2]
	leaving.stop()
	leavingMember := memberNameOf(t, leaving)
	nodeYAML := fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  annotations:\n    %s: %s\n  finalizers: [%s]\n",
		leaving.machine.Name, nodemember.MemberAnnotation, leavingMember, nodemember.Finalizer)
	if out, err := kubectlStdin(first, nodeYAML, "create", "-f", "-"); err != nil {
		t.Fatalf("registering %s's node: %v %s", leaving.machine.Name, err, out)
	}
	if out, err := first.kubectlErr("delete", "node", leaving.machine.Name, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete node: %v %s", err, out)
	}
	eventually(t, 90*time.Second, func() error {
		voters, learners, _ := etcdMembers(t, servers)
		if slices.Contains(voters, leavingMember) || slices.Contains(learners, leavingMember) {
			return fmt.Errorf("etcd member %s of deleted node %s still in %v", leavingMember, leaving.machine.Name, voters)
		}
		if out, err := first.kubectlErr("get", "node", leaving.machine.Name); err == nil {
			return fmt.Errorf("node %s not gone: %s", leaving.machine.Name, out)
		}
		return nil
	})
	out, _ = first.kubectlErr("get", "events", "-A", "--field-selector", "reason=EtcdMemberRemoved", "-o", "jsonpath={.items[*].message}")
	t.Logf("kubectl delete node %s removed its etcd member; event: %s", leaving.machine.Name, out)
	// --remove on the stopped server then only moves its data aside.
	if out, err := leaving.machine.Run(context.Background(), mizzenBin, "server", "--remove", "--data-dir", leaving.dataDir); err != nil {
		t.Fatalf("--remove: %v %s", err, out)
	}
	voters, _, _ = etcdMembers(t, servers)
	if len(voters) != 2 {
		t.Errorf("after --remove, voters %v, want 2", voters)
	}
	// A live server cannot remove its own member, nor one the cluster does not have.
	for _, name := range []string{"no-such-member", memberNameOf(t, first)} {
		if out, err := first.machine.Run(context.Background(), mizzenBin, "server", "--remove-member", name, "--data-dir", first.dataDir); err == nil {
			t.Errorf("--remove-member %s succeeded: %s", name, out)
		}
	}
	if _, err := servers[0].client().CoreV1().ConfigMaps("default").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-remove"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("write after --remove: %v", err)
	}
}

// memberNameOf is the name of s's etcd member.
func memberNameOf(t *testing.T, s *haServer) string {
	t.Helper()
	member, err := core.EtcdMemberOf(datadir.Dir(s.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	return member.Name
}

// kubectlStdin runs kubectl against s with stdin.
func kubectlStdin(s *haServer, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mizzenBin, append([]string{"kubectl", "--kubeconfig", datadir.Dir(s.dataDir).AdminKubeconfig(), "--server", s.url()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// seesEveryWrite checks that kubectl against s lists every acknowledged ConfigMap.
func seesEveryWrite(t *testing.T, s *haServer, acked []string) {
	t.Helper()
	out, err := s.kubectlErr("get", "configmaps", "-n", "default", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl against %s: %v %s", s.machine.Name, err, out)
	}
	have := map[string]bool{}
	for _, line := range strings.Fields(out) {
		have[strings.TrimPrefix(line, "configmap/")] = true
	}
	missing := 0
	for _, name := range acked {
		if !have[name] {
			missing++
			t.Errorf("kubectl against %s: acknowledged write %s missing", s.machine.Name, name)
		}
	}
	t.Logf("kubectl against %s: %d of %d acknowledged writes", s.machine.Name, len(acked)-missing, len(acked))
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
// etcd election and returns the acknowledged names. With checkServices, it also checks
// the victim's address leaves the kubernetes, kube-dns and metrics-server Services
// while it is dead and comes back once it is restarted.
func killDuringWrites(t *testing.T, servers []*haServer, victim, via *haServer, checkServices bool) []string {
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
	var live []*haServer
	for _, s := range servers {
		if s != victim {
			live = append(live, s)
		}
	}
	if checkServices {
		// The dead server's lease expires (15 s for the apiserver's, 30 s for the
		// add-ons'), then a live server sweeps it.
		servicesList(t, via, live, 90*time.Second)
	}
	victim.start()
	if victim.cmd.ProcessState != nil {
		t.Fatalf("%s did not restart: %s", victim.machine.Name, tail(victim.log.String(), 30))
	}
	if checkServices {
		servicesList(t, via, servers, 60*time.Second)
		addonsServe(t, via)
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

// servicesList waits until the kubernetes Service's endpoints and the kube-dns and
// metrics-server Services' EndpointSlices list exactly the addresses of want, read
// through via.
func servicesList(t *testing.T, via *haServer, want []*haServer, timeout time.Duration) {
	t.Helper()
	var addrs []string
	for _, s := range want {
		addrs = append(addrs, s.machine.Addr.String())
	}
	slices.Sort(addrs)
	for _, q := range []struct{ what, namespace, kind, selector, jsonpath string }{
		{"kubernetes", "default", "endpoints/kubernetes", "", "{.subsets[*].addresses[*].ip}"},
		{"kube-dns", "kube-system", "endpointslices", "kubernetes.io/service-name=kube-dns", "{.items[*].endpoints[*].addresses[*]}"},
		{"metrics-server", "kube-system", "endpointslices", "kubernetes.io/service-name=metrics-server", "{.items[*].endpoints[*].addresses[*]}"},
	} {
		args := []string{"get", "-n", q.namespace, q.kind, "-o", "jsonpath=" + q.jsonpath}
		if q.selector != "" {
			args = append(args, "-l", q.selector)
		}
		eventually(t, timeout, func() error {
			out, err := via.kubectlErr(args...)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			got := strings.Fields(out)
			slices.Sort(got)
			if !slices.Equal(got, addrs) {
				return fmt.Errorf("service %s lists %v, want the live servers %v", q.what, got, addrs)
			}
			return nil
		})
		t.Logf("service %s lists the live servers %v", q.what, addrs)
	}
}

// addonsServe checks that every endpoint of kube-dns answers a query for the
// kubernetes Service and every endpoint of metrics-server answers /healthz with a
// certificate of the cluster CA for its Service name.
func addonsServe(t *testing.T, via *haServer) {
	t.Helper()
	endpoints := func(service string) []string {
		out, err := via.kubectlErr("get", "endpointslices", "-n", "kube-system", "-l", "kubernetes.io/service-name="+service,
			"-o", `jsonpath={range .items[*]}{.endpoints[0].addresses[0]}:{.ports[0].port}{" "}{end}`)
		if err != nil {
			t.Fatalf("endpointslices of %s: %v %s", service, err, out)
		}
		return strings.Fields(out)
	}
	for _, ep := range endpoints("kube-dns") {
		eventually(t, 30*time.Second, func() error {
			q := new(dns.Msg)
			q.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
			in, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(q, ep)
			if err != nil {
				return fmt.Errorf("DNS at %s: %v", ep, err)
			}
			if len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.70.0.1" {
				return fmt.Errorf("DNS at %s answered %v, want 10.70.0.1", ep, in.Answer)
			}
			return nil
		})
	}
	caPEM, err := os.ReadFile(datadir.Dir(via.dataDir).CACert())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "metrics-server.kube-system.svc"}}}
	for _, ep := range endpoints("metrics-server") {
		eventually(t, 30*time.Second, func() error {
			resp, err := client.Get("https://" + ep + "/healthz")
			if err != nil {
				return fmt.Errorf("metrics server at %s: %v", ep, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("metrics server at %s: /healthz %s", ep, resp.Status)
			}
			return nil
		})
	}
	t.Logf("every DNS and metrics server answers")
}

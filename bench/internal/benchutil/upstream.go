package benchutil

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/pki"
	"mizzen/internal/testing/proc"
)

// Upstream is upstream Kubernetes' control plane run from its release binaries (etcd,
// kube-apiserver, and on request kube-scheduler and kube-controller-manager), each a
// process on free loopback ports, with a kubeadm-like configuration: certificates of
// its own CA (made by internal/pki), etcd over TLS with client certificates, RBAC and
// Node authorization, the default admission plugins plus NodeRestriction, managedFields
// (server-side apply is always on upstream), API priority and fairness at its defaults.
// Everything it writes lives in Dir, removed by Stop.
type Upstream struct {
	Bin        string // the directory of the binaries
	Dir        string
	Kubeconfig string // the admin's (system:masters, as kubeadm's admin.conf)
	// Config and Client are the admin's, without a client-side rate limit.
	Config *rest.Config
	Client *kubernetes.Clientset

	ca                  *pki.CA
	server              string
	etcd, apiserver     *exec.Cmd
	scheduler, ctrlMgr  *exec.Cmd
	saKey, saPub, caCrt string
}

// StartUpstream starts etcd and kube-apiserver from binDir and waits until /readyz
// answers ok. serviceCIDR is the apiserver's --service-cluster-ip-range.
func StartUpstream(binDir, serviceCIDR string) (u *Upstream, err error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-upstream-")
	if err != nil {
		return nil, err
	}
	u = &Upstream{Bin: binDir, Dir: dir}
	defer func() {
		if err != nil {
			u.Stop()
			u = nil
		}
	}()
	tls := filepath.Join(dir, "pki")
	if u.ca, err = pki.LoadOrCreateCA(tls, "ca", "upstream-bench-ca"); err != nil {
		return u, err
	}
	u.caCrt = filepath.Join(tls, "ca.crt")
	write := func(name string, is *pki.Issued) (crt, key string, err error) {
		crt, key = filepath.Join(tls, name+".crt"), filepath.Join(tls, name+".key")
		if err = os.WriteFile(crt, is.CertPEM, 0o644); err == nil {
			err = os.WriteFile(key, is.KeyPEM, 0o600)
		}
		return crt, key, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}

	// etcd, served over TLS to client certificates of the CA (kubeadm's etcd does the same).
	etcdServing, err := u.ca.IssueServing("etcd", []string{"localhost"}, loopback)
	if err != nil {
		return u, err
	}
	etcdCrt, etcdKey, err := write("etcd-server", etcdServing)
	if err != nil {
		return u, err
	}
	etcdClient, err := u.ca.IssueClient("kube-apiserver-etcd-client", nil)
	if err != nil {
		return u, err
	}
	etcdClientCrt, etcdClientKey, err := write("apiserver-etcd-client", etcdClient)
	if err != nil {
		return u, err
	}
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", FreePort())
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", FreePort())
	u.etcd, err = u.start("etcd", "etcd", "--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "default="+peerURL,
		"--cert-file", etcdCrt, "--key-file", etcdKey, "--trusted-ca-file", u.caCrt, "--client-cert-auth",
		"--snapshot-count", "10000", "--log-level", "warn")
	if err != nil {
		return u, err
	}

	// kube-apiserver.
	port := FreePort()
	u.server = fmt.Sprintf("https://127.0.0.1:%d", port)
	serving, err := u.ca.IssueServing("kube-apiserver", []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, loopback)
	if err != nil {
		return u, err
	}
	servingCrt, servingKey, err := write("apiserver", serving)
	if err != nil {
		return u, err
	}
	if u.saKey, u.saPub, err = writeServiceAccountKey(tls); err != nil {
		return u, err
	}
	u.apiserver, err = u.start("kube-apiserver", "kube-apiserver",
		// The endpoint reconciler refuses a loopback address; a documentation address
		// (TEST-NET-1) is never dialled here, and the reconciler runs as in production.
		"--advertise-address", "192.0.2.1", "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "apiserver-certs"),
		"--allow-privileged=true", "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--enable-bootstrap-token-auth=true", "--client-ca-file", u.caCrt,
		"--etcd-servers", clientURL, "--etcd-cafile", u.caCrt, "--etcd-certfile", etcdClientCrt, "--etcd-keyfile", etcdClientKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", u.saPub, "--service-account-signing-key-file", u.saKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--tls-cert-file", servingCrt, "--tls-private-key-file", servingKey)
	if err != nil {
		return u, err
	}
	u.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := u.writeKubeconfig(u.Kubeconfig, "kubernetes-admin", []string{"system:masters"}); err != nil {
		return u, err
	}
	if u.Config, u.Client, err = waitReady(u.Kubeconfig, 2*time.Minute, u.apiserver.Process.Pid); err != nil {
		return u, fmt.Errorf("%w\netcd.log ends:\n%s\nkube-apiserver.log ends:\n%s", err, u.logTail("etcd"), u.logTail("kube-apiserver"))
	}
	return u, nil
}

// logTail is the end of a process's log, for an error message.
func (u *Upstream) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(u.Dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// writeServiceAccountKey writes an ECDSA key pair for service account tokens (the
// apiserver signs with ES256 when given an EC key).
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func (u *Upstream) writeKubeconfig(path, user string, groups []string) error {
	cert, err := u.ca.IssueClient(user, groups)
	if err != nil {
		return err
	}
	return pki.WriteKubeconfig(path, u.server, u.ca.CertPEM, cert, user)
}

// start runs a binary of u.Bin with its output in Dir/name.log.
func (u *Upstream) start(name, binary string, args ...string) (*exec.Cmd, error) {
	log, err := os.OpenFile(filepath.Join(u.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(u.Bin, binary), args...)
	cmd.Stdout, cmd.Stderr = log, log
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	return cmd, nil
}

// waitReady waits until the apiserver of kubeconfig answers /readyz with ok and
// returns the kubeconfig's client without a client-side rate limit.
func waitReady(kubeconfig string, timeout time.Duration, pid int) (*rest.Config, *kubernetes.Clientset, error) {
	for start := time.Now(); time.Since(start) < timeout; time.Sleep(50 * time.Millisecond) {
		if exited(pid) {
			return nil, nil, fmt.Errorf("the apiserver of %s exited", kubeconfig)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			continue
		}
		cfg.QPS, cfg.Burst = -1, 0
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			continue
		}
		if body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
			return cfg, c, nil
		}
	}
	return nil, nil, fmt.Errorf("apiserver of %s not ready after %v", kubeconfig, timeout)
}

// exited reports whether the child pid has ended (a zombie not yet waited for).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// StartScheduler runs kube-scheduler as system:kube-scheduler with clientConnection
// qps and burst raised to qps, as scheduler_perf raises them, and no leader election.
func (u *Upstream) StartScheduler(qps float64) error {
	kc := filepath.Join(u.Dir, "scheduler.kubeconfig")
	if err := u.writeKubeconfig(kc, "system:kube-scheduler", nil); err != nil {
		return err
	}
	config := filepath.Join(u.Dir, "scheduler.yaml")
	if err := os.WriteFile(config, []byte(SchedulerConfig(kc, qps)), 0o600); err != nil {
		return err
	}
	var err error
	u.scheduler, err = u.start("kube-scheduler", "kube-scheduler", "--config", config,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(FreePort()), "--cert-dir", filepath.Join(u.Dir, "scheduler-certs"),
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc)
	return err
}

// StopScheduler stops kube-scheduler, if it runs; StartScheduler starts a new one.
func (u *Upstream) StopScheduler() {
	if u.scheduler != nil {
		proc.Stop(u.scheduler, 30*time.Second)
		u.scheduler = nil
	}
}

// SchedulerConfig is a KubeSchedulerConfiguration with kubeconfig and client qps (and
// burst) and no leader election, for both schedulers.
func SchedulerConfig(kubeconfig string, qps float64) string {
	kc := ""
	if kubeconfig != "" {
		kc = "  kubeconfig: " + kubeconfig + "\n"
	}
	return fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"clientConnection:\n%s  qps: %g\n  burst: %d\nleaderElection:\n  leaderElect: false\n", kc, qps, int(qps))
}

// StartControllerManager runs kube-controller-manager (every default controller, each
// with its own service account's credentials, as kubeadm runs it) with the given
// client qps and burst and no leader election; with clusterCIDR it allocates nodes'
// pod CIDRs (/24) from it, as kubeadm's does when given a pod subnet.
func (u *Upstream) StartControllerManager(qps, burst int, clusterCIDR string) error {
	kc := filepath.Join(u.Dir, "controller-manager.kubeconfig")
	if err := u.writeKubeconfig(kc, "system:kube-controller-manager", nil); err != nil {
		return err
	}
	var cidr []string
	if clusterCIDR != "" {
		cidr = []string{"--allocate-node-cidrs", "--cluster-cidr", clusterCIDR, "--node-cidr-mask-size", "24"}
	}
	var err error
	u.ctrlMgr, err = u.start("kube-controller-manager", "kube-controller-manager", append([]string{"--kubeconfig", kc,
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(FreePort()), "--cert-dir", filepath.Join(u.Dir, "controller-manager-certs"),
		"--leader-elect=false", "--use-service-account-credentials=true", "--controllers", "*,bootstrapsigner,tokencleaner",
		"--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(burst),
		"--root-ca-file", u.caCrt, "--service-account-private-key-file", u.saKey,
		"--cluster-signing-cert-file", u.caCrt, "--cluster-signing-key-file", filepath.Join(u.Dir, "pki", "ca.key")}, cidr...)...)
	return err
}

// ControllerManagerPID is kube-controller-manager's process (0 before it starts).
func (u *Upstream) ControllerManagerPID() int { return pid(u.ctrlMgr) }

// EtcdDB is the file of etcd's database (its size is the database's).
func (u *Upstream) EtcdDB() string { return filepath.Join(u.Dir, "etcd", "member", "snap", "db") }

// ServerPIDs are the processes that hold the API's state: kube-apiserver and etcd.
func (u *Upstream) ServerPIDs() []int { return []int{u.apiserver.Process.Pid, u.etcd.Process.Pid} }

// PIDs are all of its processes that run.
func (u *Upstream) PIDs() []int {
	var pids []int
	for _, c := range []*exec.Cmd{u.apiserver, u.etcd, u.scheduler, u.ctrlMgr} {
		if c != nil && c.Process != nil {
			pids = append(pids, c.Process.Pid)
		}
	}
	return pids
}

// Stop stops every process (the clients first, etcd last), waits for them, and
// removes Dir.
func (u *Upstream) Stop() {
	for _, c := range []*exec.Cmd{u.ctrlMgr, u.scheduler, u.apiserver, u.etcd} {
		if c != nil && c.Process != nil {
			proc.Stop(c, 30*time.Second)
		}
	}
	_ = os.RemoveAll(u.Dir)
}

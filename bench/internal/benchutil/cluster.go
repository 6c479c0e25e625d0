package benchutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"mizzen/internal/datadir"
	"mizzen/internal/pki"
	"mizzen/internal/testing/proc"
)

// Cluster is a control plane a benchmark drives the same way, whichever it is: a
// `mizzen server` or upstream's processes.
type Cluster interface {
	Name() string
	// AdminConfig is the admin's (system:masters), without a client-side rate limit.
	AdminConfig() *rest.Config
	// ServerPIDs are the processes holding the API's state (apiserver and etcd).
	ServerPIDs() []int
	// PIDs are all of its processes: the server's, the scheduler's and the
	// controller-manager's.
	PIDs() []int
	// StartScheduler runs the cluster's scheduler as its own process, as
	// system:kube-scheduler, with client qps and burst qps and no leader election.
	StartScheduler(qps float64) error
	Stop()
}

// Name is "upstream".
func (u *Upstream) Name() string { return "upstream" }

// AdminConfig is the admin's client configuration.
func (u *Upstream) AdminConfig() *rest.Config { return rest.CopyConfig(u.Config) }

// Mizzen is a Cluster of one `mizzen server` process (embedded etcd and the
// apiserver; the bundled components a benchmark disables stay off) and, on request, a
// `mizzen scheduler` process.
type Mizzen struct {
	*Server
	Bin string
	// Label names it in reports instead of "mizzen", e.g. "mizzen-before" for an
	// earlier build in the same run.
	Label string
	// ControllerManagerArgs are added to `mizzen controller-manager`'s flags (later
	// flags win), e.g. a served port with --profiling.
	ControllerManagerArgs []string
	scheduler, ctrlMgr    *exec.Cmd
}

// MizzenOnly are the `mizzen server` arguments that leave only etcd and the apiserver,
// as an upstream control plane without its scheduler and controller-manager (and
// without the bundled cloud-controller-manager, which upstream runs apart too).
var MizzenOnly = []string{"--disable", "agent,scheduler,controller-manager,cloud-controller-manager,proxy,dns,metrics-server,ingress,dashboard,network-policy"}

// StartMizzen runs `bin server` with args (StartServer) as a Cluster.
func StartMizzen(bin string, args ...string) (*Mizzen, error) {
	s, err := StartServer(bin, args...)
	if err != nil {
		return nil, err
	}
	return &Mizzen{Server: s, Bin: bin}, nil
}

// Name is its Label, or "mizzen" without one.
func (m *Mizzen) Name() string {
	if m.Label != "" {
		return m.Label
	}
	return "mizzen"
}

// AdminConfig is the admin's client configuration.
func (m *Mizzen) AdminConfig() *rest.Config { return rest.CopyConfig(m.Config) }

// ServerPIDs is the one server process.
func (m *Mizzen) ServerPIDs() []int { return []int{m.Cmd.Process.Pid} }

// StartScheduler runs `mizzen scheduler` with a client certificate of the server's CA
// for system:kube-scheduler, as upstream's runs.
func (m *Mizzen) StartScheduler(qps float64) error {
	kc, err := m.componentKubeconfig("scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	config := filepath.Join(m.Dir, "bench-scheduler.yaml")
	if err := os.WriteFile(config, []byte(SchedulerConfig(kc, qps)), 0o600); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(m.Dir, "scheduler.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	m.scheduler = exec.Command(m.Bin, "scheduler", "--config", config, "--metrics-bind-address", "0", "--secure-port", "0")
	m.scheduler.Stdout, m.scheduler.Stderr = log, log
	DieWithParent(m.scheduler)
	if err := m.scheduler.Start(); err != nil {
		return fmt.Errorf("starting mizzen scheduler: %w", err)
	}
	return nil
}

// StopScheduler stops the `mizzen scheduler` process, if one runs; StartScheduler
// starts a new one.
func (m *Mizzen) StopScheduler() {
	if m.scheduler != nil {
		proc.Stop(m.scheduler, 30*time.Second)
		m.scheduler = nil
	}
}

// StartControllerManager runs `mizzen controller-manager` (every controller, each with
// its own service account's credentials, as the bundled one and kubeadm's run) as
// system:kube-controller-manager, with client qps and burst, no leader election, and
// pod CIDRs (/24) from clusterCIDR when it is not empty. (With the manager's own
// credentials alone the node lifecycle controller may not update nodes, and no
// node's not-ready taint is ever lifted.)
func (m *Mizzen) StartControllerManager(qps, burst int, clusterCIDR string) error {
	kc, err := m.componentKubeconfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	caCert, caKey := datadir.Dir(m.Dir).Cert(datadir.CAName)
	cmd := exec.Command(m.Bin, "controller-manager", "--kubeconfig", kc, "--leader-elect=false", "--use-service-account-credentials",
		"--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(burst), "--secure-port", "0",
		"--cluster-cidr", clusterCIDR, "--cluster-signing-cert-file", caCert, "--cluster-signing-key-file", caKey)
	cmd.Args = append(cmd.Args, m.ControllerManagerArgs...)
	return m.StartAsControllerManager(cmd)
}

// StartAsControllerManager starts cmd in the controller-manager's place, logging to
// controller-manager.log in the data directory: ControllerManagerPID and Stop then
// see it (a benchmark's stand-in for it, say).
func (m *Mizzen) StartAsControllerManager(cmd *exec.Cmd) error {
	log, err := os.OpenFile(filepath.Join(m.Dir, "controller-manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s as the controller-manager: %w", cmd.Path, err)
	}
	m.ctrlMgr = cmd
	return nil
}

// componentKubeconfig writes a kubeconfig with a client certificate of the server's
// CA for user.
func (m *Mizzen) componentKubeconfig(name, user string) (string, error) {
	ca, err := pki.LoadOrCreateCA(datadir.Dir(m.Dir).TLS(), datadir.CAName, "unused")
	if err != nil {
		return "", err
	}
	cert, err := ca.IssueClient(user, nil)
	if err != nil {
		return "", err
	}
	kc := filepath.Join(m.Dir, "bench-"+name+".kubeconfig")
	return kc, pki.WriteKubeconfig(kc, m.Config.Host, ca.CertPEM, cert, user)
}

// ControllerManagerPID is the controller-manager's process (0 before it starts).
func (m *Mizzen) ControllerManagerPID() int { return pid(m.ctrlMgr) }

// EtcdDB is the file of the embedded etcd's database (its size is the database's).
func (m *Mizzen) EtcdDB() string {
	return filepath.Join(datadir.Dir(m.Dir).Etcd(), "member", "snap", "db")
}

// pid is a started command's process id, 0 when it has none.
func pid(cmd *exec.Cmd) int {
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

// PIDs are the server's, the scheduler's and the controller-manager's.
func (m *Mizzen) PIDs() []int {
	pids := m.ServerPIDs()
	for _, c := range []*exec.Cmd{m.scheduler, m.ctrlMgr} {
		if c != nil {
			pids = append(pids, c.Process.Pid)
		}
	}
	return pids
}

// Stop stops the controller-manager and the scheduler, then the server, and removes the data directory.
func (m *Mizzen) Stop() {
	for _, c := range []*exec.Cmd{m.ctrlMgr, m.scheduler} {
		if c != nil {
			proc.Stop(c, 30*time.Second)
		}
	}
	m.Server.Stop()
}

// RSS sums the resident memory of pids, in MiB.
func RSS(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		sum += ProcStats(pid).RSSMiB
	}
	return sum
}

// AnonRSS sums the anonymous part of RSS of pids (the heap and stacks, not the
// binaries' pages), in MiB.
func AnonRSS(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		sum += ProcStats(pid).AnonMiB
	}
	return sum
}

// CPU sums the CPU time of pids, in seconds.
func CPU(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		sum += ProcStats(pid).CPUSeconds
	}
	return sum
}

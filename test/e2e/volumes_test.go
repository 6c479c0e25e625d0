package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/apiserver/authn"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/podcgroups"
	"mizzen/internal/testing/apiserver"
)

// TestVolumesOnContainerd runs a kubelet on a containerd of its own against an
// apiserver with ServiceAccount admission, and a busybox pod that prints what its
// configMap, secret and service account volumes hold: the data shows in the
// container's log, an update of the ConfigMap reaches the running container, the
// projected token authenticates, and deleting the pod removes its volumes.
func TestVolumesOnContainerd(t *testing.T) {
	sideBySide(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, bin := range []string{"containerd", "ctr", "runc", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", "/bin/busybox"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s missing (containernetworking-plugins, busybox-static)", f)
		}
	}
	dir, err := os.MkdirTemp("", "mizzen-volumes-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testLog(), nil))

	// The programs the images hold: the sandbox's pause and an in-cluster client.
	pauseBin := buildStatic(ctx, t, dir, "mizzen/internal/kubelet/containerd/pause")
	inclusterBin := buildStatic(ctx, t, dir, "mizzen/test/e2e/testdata/incluster")
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	rtOpts := containerd.Options{DataDir: filepath.Join(dir, "containerd"), Bridge: "mzn-volumes"}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "delete", rtOpts.Bridge).Run()
		_ = containerd.RemoveMasquerade(rtOpts.Bridge) // the pod network's nftables table
	})
	rtCtx, stopRuntime := context.WithCancel(context.Background())
	runtimeDone := make(chan error, 1)
	go func() { runtimeDone <- containerd.Run(rtCtx, rtOpts, log) }()
	t.Cleanup(func() {
		stopRuntime()
		<-runtimeDone
	})
	if err := containerd.WaitReady(ctx, rtOpts); err != nil {
		t.Fatal(err)
	}
	if err := rtOpts.WriteCNIConfig("10.213.9.0/24"); err != nil {
		t.Fatal(err)
	}
	const image, inclusterImage = "mizzen.local/busybox:v1", "mizzen.local/incluster:test"
	for _, img := range []containerd.Image{
		containerd.PauseImage(containerd.DefaultSandboxImage, pauseBin),
		{Name: image, Files: []containerd.File{{Path: "/bin/busybox", Mode: 0o755, Data: busybox}}, Entrypoint: []string{"/bin/busybox"}},
		{Name: inclusterImage, Files: []containerd.File{{Path: "/incluster", Mode: 0o755, Data: inclusterBin}}, Entrypoint: []string{"/incluster"}},
	} {
		if err := containerd.ImportImage(ctx, rtOpts, img); err != nil {
			t.Fatal(err)
		}
	}
	rs, is, err := kubelet.ConnectRuntime(ctx, rtOpts.Endpoint(), "")
	if err != nil {
		t.Fatal(err)
	}

	// The control plane, with what the controller-manager would have made: the
	// namespace's default account and its kube-root-ca.crt.
	// It listens on every address, so that a pod reaches it at the node's own IP (there
	// is no service proxy here to route the kubernetes Service's cluster IP).
	nodeIP := defaultRouteIPv4()
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.DisableAdmissionPlugins = nil
		if nodeIP != "" {
			o.BindAddress = "0.0.0.0"
		}
	})
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Under RBAC the account may do nothing by default: it is granted what the pod's
	// in-cluster client and the checks below do.
	if _, err := client.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "app-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "app-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "app-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// `kubectl create token` goes through the TokenRequest API.
	out, err := exec.CommandContext(ctx, mizzenBin, "kubectl", "--kubeconfig", srv.AdminKubeconfig,
		"create", "token", "default", "--duration", "10m").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, out)
	}
	userCfg := rest.AnonymousClientConfig(srv.AdminConfig)
	userCfg.BearerToken = strings.TrimSpace(string(out))
	eventually(t, 10*time.Second, func() error { // the binding reaches the authorizer within moments
		_, err := kubernetes.NewForConfigOrDie(userCfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("request with the token kubectl created: %v", err)
		}
		return nil
	})
	caPEM, err := os.ReadFile(filepath.Join(srv.DataDir, "tls", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*v1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(caPEM)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "app-config"}, Data: map[string]string{"greeting": "hello"}},
	} {
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rootDir := filepath.Join(dir, "kubelet")
	logsDir := filepath.Join(dir, "pods")
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	klCtx, stopKubelet := context.WithCancel(ctx)
	kubeletDone := make(chan error, 1)
	go func() {
		kubeletDone <- kubelet.Run(klCtx, kubelet.Options{
			Client: client, NodeName: "volumes-node", Runtime: rs, Images: is, NodeIP: "10.0.0.1",
			Machine: &kubelet.MachineInfo{CPUCores: 2, MemoryBytes: 4 << 30}, RootDir: rootDir, PodLogsDir: logsDir,
			RelistPeriod: 200 * time.Millisecond, ResyncPeriod: 2 * time.Second, Logger: log,
			PodCgroups: cgroups,
		})
	}()
	t.Cleanup(func() {
		stopKubelet()
		<-kubeletDone
	})

	const script = `while true; do
  echo "cm=$(cat /etc/config/greeting) secret=$(cat /etc/secret/password) ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace) token=$(test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo present)"
  sleep 1
done`
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      "volumes-node",
			TerminationGracePeriodSeconds: ptr[int64](1),
			Volumes: []v1.Volume{
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-secret"}}},
			},
			Containers: []v1.Container{{
				Name: "app", Image: image, ImagePullPolicy: v1.PullNever,
				Command:      []string{"/bin/busybox", "sh", "-c", script},
				VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc/config"}, {Name: "secret", MountPath: "/etc/secret"}},
			}},
		},
	}
	if nodeIP != "" {
		// The kubelet sets KUBERNETES_SERVICE_HOST and _PORT from the kubernetes Service;
		// the container's own env points them at the node instead.
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name: "client", Image: inclusterImage, ImagePullPolicy: v1.PullNever,
			Args: []string{"app-config", "greeting"},
			Env: []v1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: nodeIP},
				{Name: "KUBERNETES_SERVICE_PORT", Value: strings.TrimPrefix(srv.URL[strings.LastIndex(srv.URL, ":"):], ":")}},
		})
	}
	created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cgroups.RemovePod(created.UID) }) // should the test fail before the kubelet removes it
	logFile := func(container string) string {
		return filepath.Join(logsDir, "default_reader_"+string(created.UID), container, "0.log")
	}
	waitLogOf := func(container, want string) {
		t.Helper()
		eventually(t, 90*time.Second, func() error {
			last := lastLogLine(logFile(container))
			if !strings.Contains(last, want) {
				p, _ := client.CoreV1().Pods("default").Get(ctx, "reader", metav1.GetOptions{})
				return fmt.Errorf("%s: last log line %q lacks %q (pod phase %s)", container, last, want, p.Status.Phase)
			}
			return nil
		})
	}
	waitLog := func(want string) {
		t.Helper()
		waitLogOf("app", want)
	}
	if nodeIP != "" {
		waitLogOf("client", "incluster greeting=hello")
	} else {
		t.Log("no default route: the in-cluster client is left out")
	}
	waitLog("cm=hello secret=s3cret ns=default token=present")

	// The token the kubelet projected authenticates as the pod's service account.
	var apiAccess string
	for _, v := range created.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			apiAccess = v.Name
		}
	}
	tokenPath := filepath.Join(rootDir, "pods", string(created.UID), "volumes", "kubernetes.io~projected", apiAccess, "token")
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	podCfg := rest.AnonymousClientConfig(srv.AdminConfig)
	podCfg.BearerToken = string(token)
	if _, err := kubernetes.NewForConfigOrDie(podCfg).CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{}); err != nil {
		t.Errorf("request with the pod's projected token: %v", err)
	}

	cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog("cm=bonjour secret=s3cret")
	if nodeIP != "" {
		waitLogOf("client", "incluster greeting=bonjour")
	}

	if err := client.CoreV1().Pods("default").Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(rootDir, "pods", string(created.UID))
	eventually(t, 60*time.Second, func() error {
		if _, err := client.CoreV1().Pods("default").Get(ctx, "reader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there: %v", err)
		}
		if _, err := os.Stat(podDir); !os.IsNotExist(err) {
			return fmt.Errorf("pod directory still there: %v", err)
		}
		// runc leaves the pod's cgroup (its sandbox's parent) to the kubelet.
		if left, err := cgroups.Pods(); err != nil || slices.Contains(left, created.UID) {
			return fmt.Errorf("pod cgroup still there (err %v)", err)
		}
		return nil
	})
	mounts, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(mounts), podDir) {
		t.Errorf("mounts under %s left behind", podDir)
	}
	// Refused once the server's memory of the token's last success (10 s, as
	// upstream's) has run out.
	eventually(t, authn.TokenSuccessTTL+20*time.Second, func() error {
		if _, err := kubernetes.NewForConfigOrDie(podCfg).CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("token of the deleted pod: err = %v, want 401", err)
		}
		return nil
	})
}

// lastLogLine is the message of the last complete line of a CRI log file.
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "<time> <stream> <F|P> <message>"
		if parts := strings.SplitN(sc.Text(), " ", 4); len(parts) == 4 {
			last = parts[3]
		}
	}
	return last
}

func testLog() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

func ptr[T any](v T) *T { return &v }

// buildStatic builds a static program for an image and returns it.
func buildStatic(ctx context.Context, t *testing.T, dir, pkg string) []byte {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// defaultRouteIPv4 is the IPv4 address of the interface of the default route, or "".
func defaultRouteIPv4() string {
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(routes), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(f[0])
		if err != nil {
			return ""
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return ""
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return ""
}

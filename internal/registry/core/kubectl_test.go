package core_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"mizzen/internal/testing/apiserver"
)

// kubectl runs the upstream kubectl in this process against the test server and
// returns what it printed.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	fatal := ""
	// kubectl exits the process on errors; record them instead.
	cmdutil.BehaviorOnFatal(func(msg string, code int) { fatal = fmt.Sprintf("exit %d: %s", code, msg) })
	defer cmdutil.DefaultBehaviorOnFatal()
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		Arguments:   append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...),
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   streams,
	})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	if err := cmd.Execute(); err != nil || fatal != "" {
		t.Fatalf("kubectl %s: %v %s\n%s", strings.Join(args, " "), err, fatal, errOut.String())
	}
	return out.String()
}

// table splits kubectl's column output into rows of cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// wantRow checks a row's cells, skipping the AGE-like ones given as "*".
func wantRow(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("row %q, want %q", got, want)
		return
	}
	for i := range want {
		if want[i] != "*" && got[i] != want[i] {
			t.Errorf("row %q, want %q", got, want)
			return
		}
	}
}

func TestKubectlGet(t *testing.T) {
	srv := apiserver.StartServer(t)
	kc := srv.AdminKubeconfig
	c := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()

	ns := "shop"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	svcGot, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	node, err = c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian", KernelVersion: "6.12", ContainerRuntimeVersion: "containerd://2.1"},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("pods", func(t *testing.T) {
		rows := table(kubectl(t, kc, "get", "pods", "-n", ns))
		wantRow(t, rows[0], "NAME", "READY", "STATUS", "RESTARTS", "AGE")
		wantRow(t, rows[1], "web", "0/1", "Pending", "0", "*")
		rows = table(kubectl(t, kc, "get", "po", "-n", ns, "-o", "wide"))
		wantRow(t, rows[0], "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES")
		wantRow(t, rows[1], "web", "0/1", "Pending", "0", "*", "<none>", "<none>", "<none>", "<none>")
	})

	t.Run("services", func(t *testing.T) {
		rows := table(kubectl(t, kc, "get", "svc", "-n", ns, "-o", "wide"))
		wantRow(t, rows[0], "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")
		wantRow(t, rows[1], "web", "NodePort", svcGot.Spec.ClusterIP, "<none>", "80:30080/TCP", "*", "app=web")
	})

	t.Run("nodes", func(t *testing.T) {
		rows := table(kubectl(t, kc, "get", "no", "-o", "wide"))
		wantRow(t, rows[0], "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
		wantRow(t, rows[1], "node-1", "Ready", "control-plane", "*", "v1.37.2", "192.168.1.10", "<none>", "Debian", "6.12", "containerd://2.1")
		kubectl(t, kc, "cordon", "node-1")
		rows = table(kubectl(t, kc, "get", "nodes"))
		wantRow(t, rows[1], "node-1", "Ready,SchedulingDisabled", "control-plane", "*", "v1.37.2")
	})

	t.Run("namespaces", func(t *testing.T) {
		rows := table(kubectl(t, kc, "get", "ns", ns))
		wantRow(t, rows[0], "NAME", "STATUS", "AGE")
		wantRow(t, rows[1], ns, "Active", "*")
	})

	t.Run("get all uses the all category", func(t *testing.T) {
		out := kubectl(t, kc, "get", "all", "-n", ns)
		for _, want := range []string{"pod/web", "service/web"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get all missing %s:\n%s", want, out)
			}
		}
	})

	t.Run("create and field selectors", func(t *testing.T) {
		kubectl(t, kc, "create", "configmap", "cfg", "-n", ns, "--from-literal=a=1", "--from-literal=b=2")
		kubectl(t, kc, "create", "secret", "generic", "pw", "-n", ns, "--from-literal=password=x")
		rows := table(kubectl(t, kc, "get", "cm,secrets", "-n", ns, "--field-selector", "metadata.name!=kube-root-ca.crt"))
		found := map[string][]string{}
		for _, r := range rows {
			if len(r) > 0 {
				found[r[0]] = r
			}
		}
		wantRow(t, found["configmap/cfg"], "configmap/cfg", "2", "*")
		wantRow(t, found["secret/pw"], "secret/pw", "Opaque", "1", "*")
		out := kubectl(t, kc, "get", "pods", "-A", "--field-selector", "status.phase=Pending", "-o", "name")
		if strings.TrimSpace(out) != "pod/web" {
			t.Errorf("pods with status.phase=Pending: %q", out)
		}
	})
}

package core_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/kubectlrun"
)

// kubectlErr runs kubectl expecting it to fail and returns what it reported.
func kubectlErr(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, failure := kubectlrun.Run(kubeconfig, args...)
	if failure == "" {
		t.Fatalf("kubectl %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return failure
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
	// Keep kubectl's discovery cache out of $HOME.
	t.Setenv("KUBECACHEDIR", t.TempDir())
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
		rows := table(kubectlrun.MustRun(t, kc, "get", "pods", "-n", ns))
		wantRow(t, rows[0], "NAME", "READY", "STATUS", "RESTARTS", "AGE")
		wantRow(t, rows[1], "web", "0/1", "Pending", "0", "*")
		rows = table(kubectlrun.MustRun(t, kc, "get", "po", "-n", ns, "-o", "wide"))
		wantRow(t, rows[0], "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES")
		wantRow(t, rows[1], "web", "0/1", "Pending", "0", "*", "<none>", "<none>", "<none>", "<none>")
	})

	t.Run("services", func(t *testing.T) {
		rows := table(kubectlrun.MustRun(t, kc, "get", "svc", "-n", ns, "-o", "wide"))
		wantRow(t, rows[0], "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")
		wantRow(t, rows[1], "web", "NodePort", svcGot.Spec.ClusterIP, "<none>", "80:30080/TCP", "*", "app=web")
	})

	t.Run("nodes", func(t *testing.T) {
		rows := table(kubectlrun.MustRun(t, kc, "get", "no", "-o", "wide"))
		wantRow(t, rows[0], "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
		wantRow(t, rows[1], "node-1", "Ready", "control-plane", "*", "v1.37.2", "192.168.1.10", "<none>", "Debian", "6.12", "containerd://2.1")
		kubectlrun.MustRun(t, kc, "cordon", "node-1")
		rows = table(kubectlrun.MustRun(t, kc, "get", "nodes"))
		wantRow(t, rows[1], "node-1", "Ready,SchedulingDisabled", "control-plane", "*", "v1.37.2")
	})

	t.Run("namespaces", func(t *testing.T) {
		rows := table(kubectlrun.MustRun(t, kc, "get", "ns", ns))
		wantRow(t, rows[0], "NAME", "STATUS", "AGE")
		wantRow(t, rows[1], ns, "Active", "*")
	})

	t.Run("get all uses the all category", func(t *testing.T) {
		out := kubectlrun.MustRun(t, kc, "get", "all", "-n", ns)
		for _, want := range []string{"pod/web", "service/web"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get all missing %s:\n%s", want, out)
			}
		}
	})

	t.Run("events", func(t *testing.T) {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, Type: "Warning", Reason: "BackOff", Message: "Back-off pulling image",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"}, Count: 3,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}}
		if _, err := c.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rows := table(kubectlrun.MustRun(t, kc, "get", "events", "-n", ns))
		wantRow(t, rows[0], "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
		wantRow(t, rows[1], "*", "Warning", "BackOff", "pod/web", "Back-off", "pulling", "image")
	})

	t.Run("storage, quota and limits", func(t *testing.T) {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: "local", PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}}}
		if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rows := table(kubectlrun.MustRun(t, kc, "get", "pv"))
		wantRow(t, rows[0], "NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE")
		wantRow(t, rows[1], "pv1", "5Gi", "RWO", "Retain", "Pending", "local", "<unset>", "*")

		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rows = table(kubectlrun.MustRun(t, kc, "get", "pvc", "-n", ns))
		wantRow(t, rows[1], "data", "Pending", "<unset>", "*")

		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("10")}}}
		if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rows = table(kubectlrun.MustRun(t, kc, "get", "quota", "-n", ns))
		wantRow(t, rows[0], "NAME", "REQUEST", "LIMIT", "AGE")

		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}
		got, err := c.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := got.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU]; q.String() != "2" {
			t.Errorf("limit range default request cpu = %s, want 2 from max", q.String())
		}
		rows = table(kubectlrun.MustRun(t, kc, "get", "limits", "-n", ns))
		wantRow(t, rows[0], "NAME", "CREATED", "AT")
		wantRow(t, rows[1], "lr", got.CreationTimestamp.UTC().Format(time.RFC3339))
	})

	t.Run("create and field selectors", func(t *testing.T) {
		kubectlrun.MustRun(t, kc, "create", "configmap", "cfg", "-n", ns, "--from-literal=a=1", "--from-literal=b=2")
		kubectlrun.MustRun(t, kc, "create", "secret", "generic", "pw", "-n", ns, "--from-literal=password=x")
		rows := table(kubectlrun.MustRun(t, kc, "get", "cm,secrets", "-n", ns, "--field-selector", "metadata.name!=kube-root-ca.crt"))
		found := map[string][]string{}
		for _, r := range rows {
			if len(r) > 0 {
				found[r[0]] = r
			}
		}
		wantRow(t, found["configmap/cfg"], "configmap/cfg", "2", "*")
		wantRow(t, found["secret/pw"], "secret/pw", "Opaque", "1", "*")
		out := kubectlrun.MustRun(t, kc, "get", "pods", "-A", "--field-selector", "status.phase=Pending", "-o", "name")
		if strings.TrimSpace(out) != "pod/web" {
			t.Errorf("pods with status.phase=Pending: %q", out)
		}
	})
}

func TestKubectlWorkflows(t *testing.T) {
	// Keep kubectl's discovery cache out of $HOME.
	t.Setenv("KUBECACHEDIR", t.TempDir())
	srv := apiserver.StartServer(t)
	kc := srv.AdminKubeconfig
	dir := t.TempDir()
	// The test apiserver serves no OpenAPI document, so kubectl's client-side schema
	// validation is off (--validate=false); the server still validates everything.
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("run, expose and describe", func(t *testing.T) {
		kubectlrun.MustRun(t, kc, "run", "web", "--image=nginx:1.27", "--labels=app=web", "--port=80")
		kubectlrun.MustRun(t, kc, "expose", "pod", "web", "--port=8080", "--target-port=80")
		rows := table(kubectlrun.MustRun(t, kc, "get", "svc", "web", "-o", "wide"))
		wantRow(t, rows[1], "web", "ClusterIP", "*", "<none>", "8080/TCP", "*", "app=web")
		described := map[string]string{}
		for _, line := range strings.Split(kubectlrun.MustRun(t, kc, "describe", "pod", "web"), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, " ") {
				described[k] = strings.TrimSpace(v)
			}
		}
		for k, want := range map[string]string{"Name": "web", "Status": "Pending", "QoS Class": "BestEffort", "Node": "<none>"} {
			if described[k] != want {
				t.Errorf("describe pod %s = %q, want %q", k, described[k], want)
			}
		}
	})

	t.Run("apply: image changes, port changes are refused", func(t *testing.T) {
		manifest := `apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  containers:
  - name: app
    image: nginx:%s
    ports:
    - containerPort: %d
`
		kubectlrun.MustRun(t, kc, "apply", "--validate=false", "-f", write("pod1.yaml", fmt.Sprintf(manifest, "1.26", 80)))
		kubectlrun.MustRun(t, kc, "apply", "--validate=false", "-f", write("pod2.yaml", fmt.Sprintf(manifest, "1.27", 80)))
		out := kubectlrun.MustRun(t, kc, "get", "pod", "app", "-o", "jsonpath={.spec.containers[0].image}")
		if out != "nginx:1.27" {
			t.Errorf("image after apply = %q", out)
		}
		msg := kubectlErr(t, kc, "apply", "--validate=false", "-f", write("pod3.yaml", fmt.Sprintf(manifest, "1.27", 8080)))
		if !strings.Contains(msg, `The Pod "app" is invalid: spec: Forbidden: pod updates may not change fields other than`) {
			t.Errorf("apply with a new port: %s", msg)
		}
	})

	t.Run("invalid objects are explained", func(t *testing.T) {
		msg := kubectlErr(t, kc, "create", "--validate=false", "-f", write("bad.yaml", `apiVersion: v1
kind: Service
metadata:
  name: bad
spec:
  type: NodePort
  ports:
  - port: 80
    nodePort: 80
`))
		if !strings.Contains(msg, `The Service "bad" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767`) {
			t.Errorf("create service with node port 80: %s", msg)
		}
	})

	t.Run("scale a replication controller", func(t *testing.T) {
		kubectlrun.MustRun(t, kc, "apply", "--validate=false", "-f", write("rc.yaml", `apiVersion: v1
kind: ReplicationController
metadata:
  name: rc
spec:
  template:
    metadata:
      labels:
        app: rc
    spec:
      containers:
      - name: c
        image: busybox
`))
		kubectlrun.MustRun(t, kc, "scale", "rc", "rc", "--replicas=4")
		rows := table(kubectlrun.MustRun(t, kc, "get", "rc", "rc", "-o", "wide"))
		wantRow(t, rows[0], "NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
		wantRow(t, rows[1], "rc", "4", "0", "0", "*", "c", "busybox", "app=rc")
	})

	t.Run("taint a node", func(t *testing.T) {
		kubectlrun.MustRun(t, kc, "create", "--validate=false", "-f", write("node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"))
		kubectlrun.MustRun(t, kc, "taint", "nodes", "n1", "dedicated=gpu:NoSchedule")
		out := kubectlrun.MustRun(t, kc, "get", "node", "n1", "-o", "jsonpath={.spec.taints[0].effect}")
		if out != "NoSchedule" {
			t.Errorf("taint effect = %q", out)
		}
		// kubectl taint checks effects itself; a patch reaches the server.
		msg := kubectlErr(t, kc, "patch", "node", "n1", "--type=json",
			"-p", `[{"op":"add","path":"/spec/taints/-","value":{"key":"other","effect":"Sometimes"}}]`)
		if !strings.Contains(msg, `spec.taints[1].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`) {
			t.Errorf("bad taint effect: %s", msg)
		}
	})
}

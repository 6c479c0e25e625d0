package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const storageStatefulSetYAML = `apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  persistentVolumeClaimRetentionPolicy: {whenScaled: Delete, whenDeleted: Retain}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: ` + busyboxImage + `
        command: ["sh", "-c", "[ -f /data/first ] || echo \"$(hostname) $(date +%s%N)\" > /data/first; exec sleep 3600"]
        volumeMounts:
        - {name: data, mountPath: /data}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
`

const storageHolderYAML = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: held}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: holder}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sh", "-c", "echo kept > /data/file; exec sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: held}
---
apiVersion: v1
kind: Pod
metadata: {name: scratchy}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sh", "-c", "echo scratch > /scratch/file; exec sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 8Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless-wish}
spec:
  storageClassName: nope
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Mi}}
`

const csiDriverName = "hostpath.csi.mizzen.io"

// csiDriverPodYAML is the agnhost csi-hostpath driver as a node plugin pod: privileged,
// with the kubelet's root directory at the same path and Bidirectional propagation so
// the bind mounts it makes for pods reach the host, as a real CSI driver's DaemonSet.
// extra are more flags of the driver (--stage, --mount-group).
func csiDriverPodYAML(kubeletDir, root string, extra ...string) string {
	return csiDriverPodOn("csi-hostpath-node", "", kubeletDir, root, extra...)
}

// csiDriverPodOn is the driver's pod of this name, bound to node unless it is empty, as
// a driver's DaemonSet puts one on each node.
func csiDriverPodOn(name, node, kubeletDir, root string, extra ...string) string {
	args := ""
	for _, a := range extra {
		args += ", " + a
	}
	nodeName := ""
	if node != "" {
		nodeName = "\n  nodeName: " + node
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[6]s, namespace: kube-system}
spec:%[7]s
  terminationGracePeriodSeconds: 2
  containers:
  - name: driver
    image: %[1]s
    args: [csi-hostpath, --driver-name, %[2]s, --endpoint, %[3]s/plugins/%[2]s/csi.sock, --registration-dir, %[3]s/plugins_registry, --root, /csi-data%[5]s]
    env:
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    securityContext: {privileged: true}
    volumeMounts:
    - {name: kubelet, mountPath: %[3]s, mountPropagation: Bidirectional}
    - {name: data, mountPath: /csi-data}
  volumes:
  - {name: kubelet, hostPath: {path: %[3]s, type: Directory}}
  - {name: data, hostPath: {path: %[4]s, type: Directory}}
`, agnhostImage, csiDriverName, kubeletDir, root, args, name, nodeName)
}

const csiVolumeYAML = `apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-e2e}
spec:
  capacity: {storage: 10Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: csi-static
  csi: {driver: hostpath.csi.mizzen.io, volumeHandle: vol-e2e}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-claim}
spec:
  storageClassName: csi-static
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: csi-reader}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: csi-claim}
`

// TestPersistentStorage runs `mizzen server` with its agent on a containerd of its own
// and uses storage as a user would: the default local-path class, a StatefulSet whose
// pods keep their data when recreated, a claim that stays Terminating while a pod uses
// it and whose volume's directory leaves the disk with it, and a claim of a class that
// does not exist, which stays Pending and says why; and a CSI driver's volume.
func TestPersistentStorage(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed")
	}
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar") // the CSI driver's image
	bridge := "mzn-stor"
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", "10.232.0.0/16", "--service-cluster-ip-range", "10.114.0.0/16",
		"--pod-bridge", bridge, "--kubelet-port", strconv.Itoa(freePort(t)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(c.log.String(), 80))
		}
		_, _ = c.kubectlErr("delete", "statefulset", "db", "--wait=false")
		cleanupHost(t, c, dataDir, bridge)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	readyNode(t, ctx, client, dataDir, images)

	// The bundled class, as k3s's.
	eventually(t, 60*time.Second, func() error {
		out, err := c.kubectlErr("get", "storageclass")
		if err != nil || !strings.Contains(out, "local-path (default)") || !strings.Contains(out, "mizzen.io/local-path") ||
			!strings.Contains(out, "WaitForFirstConsumer") {
			return fmt.Errorf("kubectl get sc: %v\n%s", err, out)
		}
		return nil
	})

	c.kubectlStdin(storageStatefulSetYAML, "apply", "-f", "-")
	c.kubectlStdin(storageHolderYAML, "apply", "-f", "-")

	// A StatefulSet of 2: one claim per ordinal, provisioned on the node and bound.
	for _, name := range []string{"db-0", "db-1", "holder", "scratchy"} {
		c.waitPod("default", name, 3*time.Minute, runningAndReady)
	}
	out := c.kubectl("get", "pvc")
	for _, claim := range []string{"data-db-0", "data-db-1", "held", "scratchy-scratch"} {
		if !rowHas(out, claim, "Bound", "RWO", "local-path") {
			t.Errorf("kubectl get pvc: no bound row for %s:\n%s", claim, out)
		}
	}
	t.Logf("kubectl get pvc:\n%s", out)
	t.Logf("kubectl get pv:\n%s", c.kubectl("get", "pv"))

	// The pod is deleted; its replacement finds what it wrote.
	before := strings.TrimSpace(c.kubectl("exec", "db-0", "--", "cat", "/data/first"))
	if !strings.HasPrefix(before, "db-0 ") {
		t.Fatalf("db-0 wrote %q", before)
	}
	old, err := c.getPod("default", "db-0")
	if err != nil {
		t.Fatal(err)
	}
	c.kubectl("delete", "pod", "db-0", "--wait=true", "--timeout=60s")
	c.waitPod("default", "db-0", 3*time.Minute, func(p *v1.Pod) error {
		if p.UID == old.UID {
			return fmt.Errorf("still the old pod")
		}
		return runningAndReady(p)
	})
	if after := strings.TrimSpace(c.kubectl("exec", "db-0", "--", "cat", "/data/first")); after != before {
		t.Errorf("after the pod came back /data/first = %q, want %q", after, before)
	}

	// A bound claim grows: the local-path resizer records the new size on the volume
	// and the claim.
	c.kubectl("patch", "pvc", "data-db-1", "-p", `{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}`)
	eventually(t, 60*time.Second, func() error {
		if out := c.kubectl("get", "pvc", "data-db-1"); !rowHas(out, "data-db-1", "Bound", "128Mi") {
			return fmt.Errorf("claim not resized:\n%s", out)
		}
		if out := c.kubectl("get", "pv"); !rowHas(firstRowWith(out, "default/data-db-1"), "", "128Mi") {
			return fmt.Errorf("volume not resized:\n%s", out)
		}
		return nil
	})

	// Scaled down, the StatefulSet deletes the condemned ordinal's claim (whenScaled:
	// Delete) and keeps the others.
	c.kubectl("scale", "statefulset", "db", "--replicas=1")
	eventually(t, 120*time.Second, func() error {
		if out, err := c.kubectlErr("get", "pvc", "data-db-1"); err == nil {
			return fmt.Errorf("claim of the scaled-away ordinal still there:\n%s", out)
		}
		return nil
	})
	if out := c.kubectl("get", "pvc", "data-db-0"); !rowHas(out, "data-db-0", "Bound") {
		t.Errorf("claim of the remaining ordinal:\n%s", out)
	}

	// A claim in use stays Terminating while its pod lives.
	claim, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("volume of held: %v %+v", err, pv)
	}
	dir := pv.Spec.HostPath.Path
	if !strings.HasPrefix(dir, dataDir+"/storage/") {
		t.Errorf("local-path directory %s is not under DATA_DIR/storage", dir)
	}
	if b, err := os.ReadFile(dir + "/file"); err != nil || string(b) != "kept\n" {
		t.Errorf("the volume's file on the node: %q %v", b, err)
	}
	c.kubectl("delete", "pvc", "held", "--wait=false")
	for range 5 {
		time.Sleep(time.Second)
		if out := c.kubectl("get", "pvc", "held"); !rowHas(out, "held", "Terminating") {
			t.Fatalf("a claim in use is not Terminating:\n%s", out)
		}
	}
	c.kubectl("delete", "pod", "holder", "--wait=true", "--timeout=60s")
	// Then the claim goes, its Delete volume with it, and the directory from the disk.
	eventually(t, 90*time.Second, func() error {
		if out, err := c.kubectlErr("get", "pvc", "held"); err == nil {
			return fmt.Errorf("claim still there:\n%s", out)
		}
		if out, err := c.kubectlErr("get", "pv", pv.Name); err == nil {
			return fmt.Errorf("volume still there:\n%s", out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("directory %s still on disk (%v)", dir, err)
		}
		return nil
	})

	// An ephemeral volume's claim is its pod's, and goes with it.
	scratch, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "scratchy-scratch", metav1.GetOptions{})
	if err != nil || len(scratch.OwnerReferences) != 1 || scratch.OwnerReferences[0].Name != "scratchy" {
		t.Fatalf("ephemeral claim: %v %+v", err, scratch)
	}
	if out := strings.TrimSpace(c.kubectl("exec", "scratchy", "--", "cat", "/scratch/file")); out != "scratch" {
		t.Errorf("ephemeral volume holds %q", out)
	}
	c.kubectl("delete", "pod", "scratchy", "--wait=true", "--timeout=60s")
	eventually(t, 90*time.Second, func() error {
		if out, err := c.kubectlErr("get", "pvc", "scratchy-scratch"); err == nil {
			return fmt.Errorf("ephemeral claim outlives its pod:\n%s", out)
		}
		return nil
	})

	// A CSI driver, run as a privileged pod as real drivers are, registers with the
	// node's kubelet; a pod's claim bound to one of its volumes sees what the driver
	// publishes, the driver unpublishes it with the pod, and the driver's CSINode entry
	// goes when the driver does.
	kubeletDir := filepath.Join(dataDir, "agent", "kubelet")
	csiRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(csiRoot, "vol-e2e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(csiRoot, "vol-e2e", "hello"), []byte("from-csi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.kubectlStdin(csiDriverPodYAML(kubeletDir, csiRoot), "apply", "-f", "-")
	c.waitPod("kube-system", "csi-hostpath-node", 2*time.Minute, runningAndReady)
	// Minutes, not seconds: beside another test on a loaded machine the registration
	// took over a minute; only whether it happens is under test.
	eventually(t, 3*time.Minute, func() error {
		if out, err := c.kubectlErr("get", "csinode", "-o", "jsonpath={.items[*].spec.drivers[*].name}"); err != nil || strings.TrimSpace(out) != csiDriverName {
			return fmt.Errorf("CSINode drivers: %v %q", err, out)
		}
		return nil
	})
	c.kubectlStdin(csiVolumeYAML, "apply", "-f", "-")
	c.waitPod("default", "csi-reader", 3*time.Minute, runningAndReady)
	if out := strings.TrimSpace(c.kubectl("exec", "csi-reader", "--", "cat", "/data/hello")); out != "from-csi" {
		t.Errorf("the CSI volume holds %q", out)
	}
	c.kubectl("delete", "pod", "csi-reader", "--wait=true", "--timeout=60s")
	eventually(t, 30*time.Second, func() error {
		logs := c.kubectl("logs", "-n", "kube-system", "csi-hostpath-node")
		if !strings.Contains(logs, "publish vol-e2e\nunpublish vol-e2e\n") {
			return fmt.Errorf("the driver's calls:\n%s", logs)
		}
		return nil
	})
	c.kubectl("delete", "pod", "-n", "kube-system", "csi-hostpath-node", "--wait=true", "--timeout=60s")
	eventually(t, 60*time.Second, func() error {
		if out, err := c.kubectlErr("get", "csinode", "-o", "jsonpath={.items[*].spec.drivers[*].name}"); err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("CSINode drivers after the driver's pod went: %v %q", err, out)
		}
		return nil
	})

	// A claim of a class that does not exist stays Pending and says why.
	eventually(t, 60*time.Second, func() error {
		out, err := c.kubectlErr("describe", "pvc", "classless-wish")
		if err != nil || !strings.Contains(out, "Pending") || !strings.Contains(out, "ProvisioningFailed") ||
			!strings.Contains(out, `storageclass.storage.k8s.io "nope" not found`) {
			return fmt.Errorf("kubectl describe pvc: %v\n%s", err, out)
		}
		return nil
	})
}

// rowHas reports whether a table row starting with name (any row, if name is empty)
// holds every one of want.
func rowHas(table, name string, want ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (name != "" && f[0] != name) {
			continue
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				return false
			}
		}
		return true
	}
	return false
}

// firstRowWith is the first line of table that contains s.
func firstRowWith(table, s string) string {
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

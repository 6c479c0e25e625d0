package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/datadir"
)

// storageLab is the two machines' network of the storage test.
var storageLab = labNet{prefix: "mst7", subnet: "10.250.195.0/24", clusterCIDR: "10.197.0.0/16", serviceCIDR: "10.198.0.0/16",
	clusterDNS: "10.198.0.10", bridgePrefix: "mzn-st7n", nodePrefix: "mst7-node-", machines: 2}

const nodesStatefulSetYAML = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: keeper}
spec:
  serviceName: keeper
  replicas: 1
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Retain}
  selector: {matchLabels: {app: keeper}}
  template:
    metadata: {labels: {app: keeper}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: ` + busyboxImage + `
        command: ["sh", "-c", "[ -f /data/born ] || echo \"$(date +%s%N)\" > /data/born; exec sleep 3600"]
        volumeMounts:
        - {name: data, mountPath: /data}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 16Mi}}
`

// TestStorageAcrossNodes runs a server and an agent on two machines: a
// WaitForFirstConsumer local-path claim of a StatefulSet's pod is provisioned on the
// node the scheduler picked, the volume's node affinity brings the recreated pod back
// there and keeps a pod pinned elsewhere from using it, the claim goes with the set
// (whenDeleted: Delete), and a CSI driver pod on each node registers with that node's
// kubelet and serves the volumes of pods there.
func TestStorageAcrossNodes(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd on two machines")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed")
	}
	mn := startMultiNodeOn(t, storageLab, "host-gw")
	c := mn.server
	ctx := context.Background()
	dirs := map[string]string{mn.nodes[0]: mn.serverDir, mn.nodes[1]: mn.agents[0].dataDir}

	c.kubectlStdin(nodesStatefulSetYAML, "apply", "-f", "-")
	first := c.waitPod("default", "keeper-0", 3*time.Minute, runningAndReady)
	node := first.Spec.NodeName
	claim, err := mn.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-keeper-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.Annotations["volume.kubernetes.io/selected-node"]; got != node {
		t.Errorf("selected-node annotation %q, the pod runs on %q", got, node)
	}
	pv, err := mn.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil ||
		!strings.Contains(fmt.Sprint(pv.Spec.NodeAffinity.Required.NodeSelectorTerms), node) {
		t.Errorf("volume %s's node affinity %+v does not name %s", pv.Name, pv.Spec.NodeAffinity, node)
	}
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, datadir.Dir(dirs[node]).Storage()+"/") {
		t.Fatalf("volume %s is not in %s's local-path directory: %+v", pv.Name, node, pv.Spec.PersistentVolumeSource)
	}
	born := strings.TrimSpace(c.kubectl("exec", "keeper-0", "--", "cat", "/data/born"))
	if b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "born")); err != nil || strings.TrimSpace(string(b)) != born {
		t.Errorf("the file on %s's disk: %q %v, the pod wrote %q", node, b, err, born)
	}

	// The pod is deleted: its replacement goes where the volume is, and finds the file.
	c.kubectl("delete", "pod", "keeper-0", "--wait=true", "--timeout=60s")
	again := c.waitPod("default", "keeper-0", 3*time.Minute, func(p *v1.Pod) error {
		if p.UID == first.UID {
			return fmt.Errorf("still the old pod")
		}
		return runningAndReady(p)
	})
	if again.Spec.NodeName != node {
		t.Errorf("the recreated pod runs on %s, its volume is on %s", again.Spec.NodeName, node)
	}
	if got := strings.TrimSpace(c.kubectl("exec", "keeper-0", "--", "cat", "/data/born")); got != born {
		t.Errorf("after the pod came back /data/born = %q, want %q", got, born)
	}

	// A pod that must run on the other node cannot have the volume, and says why.
	other := mn.nodes[0]
	if other == node {
		other = mn.nodes[1]
	}
	elsewhere := podOn("elsewhere", "", nil, false)
	elsewhere.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": other}
	elsewhere.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	elsewhere.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-keeper-0"}}}}
	if _, err := mn.client.CoreV1().Pods("default").Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() error {
		out, err := c.kubectlErr("describe", "pod", "elsewhere")
		if err != nil || !strings.Contains(out, "FailedScheduling") || !strings.Contains(out, "1 node(s) had volume node affinity conflict") {
			return fmt.Errorf("FailedScheduling events of the pod pinned elsewhere: %v\n%s", err, out)
		}
		return nil
	})
	c.kubectl("delete", "pod", "elsewhere", "--wait=true", "--timeout=60s")

	// A CSI driver pod on each node, as its DaemonSet would put them, registers with
	// that node's kubelet; a volume reachable only from the agent's node is published
	// there by the agent's driver.
	csiRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(csiRoot, "vol-far"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(csiRoot, "vol-far", "hello"), []byte("far\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, n := range mn.nodes {
		c.kubectlStdin(csiDriverPodOn(fmt.Sprintf("csi-hostpath-%d", i), n, datadir.Dir(dirs[n]).Kubelet(), csiRoot, "--stage"), "apply", "-f", "-")
	}
	for i := range mn.nodes {
		c.waitPod("kube-system", fmt.Sprintf("csi-hostpath-%d", i), 2*time.Minute, runningAndReady)
	}
	// Minutes, not seconds: beside another test on a loaded machine the registration
	// took over a minute; only whether it happens is under test.
	eventually(t, 3*time.Minute, func() error {
		for _, n := range mn.nodes {
			out, err := c.kubectlErr("get", "csinode", n, "-o", "jsonpath={.spec.drivers[*].nodeID}")
			if err != nil || strings.TrimSpace(out) != n {
				return fmt.Errorf("CSINode %s: %v %q", n, err, out)
			}
		}
		return nil
	})
	agentNode := mn.nodes[1]
	c.kubectlStdin(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-far}
spec:
  capacity: {storage: 4Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: csi-static
  csi: {driver: %s, volumeHandle: vol-far}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%s]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-far}
spec: {storageClassName: csi-static, accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Mi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: far-reader}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: csi-far}
`, csiDriverName, agentNode, busyboxImage), "apply", "-f", "-")
	reader := c.waitPod("default", "far-reader", 3*time.Minute, runningAndReady)
	if reader.Spec.NodeName != agentNode {
		t.Errorf("far-reader runs on %s, its volume is reachable only from %s", reader.Spec.NodeName, agentNode)
	}
	if out := strings.TrimSpace(c.kubectl("exec", "far-reader", "--", "cat", "/data/hello")); out != "far" {
		t.Errorf("the CSI volume on the agent holds %q", out)
	}
	if logs := c.kubectl("logs", "-n", "kube-system", "csi-hostpath-1"); !strings.Contains(logs, "stage vol-far\npublish vol-far\n") {
		t.Errorf("the agent's driver did not stage and publish the volume:\n%s", logs)
	}
	c.kubectl("delete", "pod", "far-reader", "--wait=true", "--timeout=60s")

	// The set deleted, its claim goes with it (whenDeleted: Delete), and the volume's
	// directory leaves the node's disk.
	c.kubectl("delete", "statefulset", "keeper", "--wait=true", "--timeout=60s")
	eventually(t, 120*time.Second, func() error {
		if out, err := c.kubectlErr("get", "pvc", "data-keeper-0"); err == nil {
			return fmt.Errorf("claim outlives its set:\n%s", out)
		}
		if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
			return fmt.Errorf("directory %s still on %s's disk (%v)", pv.Spec.HostPath.Path, node, err)
		}
		return nil
	})
	for i := range mn.nodes {
		c.kubectl("delete", "pod", "-n", "kube-system", fmt.Sprintf("csi-hostpath-%d", i), "--wait=true", "--timeout=60s")
	}
}

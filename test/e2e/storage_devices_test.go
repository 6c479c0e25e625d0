package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// loopDevice makes a loop device over a small file that starts with marker, detached
// when the test ends whatever its outcome.
func loopDevice(t *testing.T, dir, name, marker string) string {
	t.Helper()
	img := filepath.Join(dir, name+".img")
	if err := os.WriteFile(img, []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 4<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v\n%s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Logf("losetup --detach %s: %v\n%s", dev, err, out)
		}
	})
	return dev
}

// deviceNode makes a block device node at path for the same device as dev.
func deviceNode(t *testing.T, dev, path string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(path, syscall.S_IFBLK|0o600, int(unix.Mkdev(unix.Major(st.Rdev), unix.Minor(st.Rdev)))); err != nil {
		t.Fatal(err)
	}
}

func localBlockYAML(node, device string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: local-block}
spec:
  capacity: {storage: 4Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: block-static
  local: {path: %s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%s]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: raw-local}
spec:
  storageClassName: block-static
  volumeMode: Block
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 4Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: raw-local}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
    volumeDevices:
    - {name: raw, devicePath: /dev/xvda}
  volumes:
  - name: raw
    persistentVolumeClaim: {claimName: raw-local}
`, device, node, busyboxImage)
}

// csiVolumesYAML are static volumes of the hostpath driver, one claim each: two
// directories (for the fsGroup policies) and a block device.
const csiVolumesYAML = `apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-file}
spec:
  capacity: {storage: 4Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: csi-static
  claimRef: {namespace: default, name: csi-file}
  csi: {driver: hostpath.csi.mizzen.io, volumeHandle: vol-file}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-none}
spec:
  capacity: {storage: 4Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: csi-static
  claimRef: {namespace: default, name: csi-none}
  csi: {driver: hostpath.csi.mizzen.io, volumeHandle: vol-none}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-block}
spec:
  capacity: {storage: 4Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: csi-static
  claimRef: {namespace: default, name: csi-block}
  csi: {driver: hostpath.csi.mizzen.io, volumeHandle: vol-block}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-file}
spec: {storageClassName: csi-static, accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-none}
spec: {storageClassName: csi-static, accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-block}
spec: {storageClassName: csi-static, volumeMode: Block, accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Mi}}}
`

func csiDriverObjectYAML(policy string) string {
	return fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %s}
spec: {attachRequired: false, fsGroupPolicy: %s}
`, csiDriverName, policy)
}

// groupPodYAML is a pod with fsGroup 2345 using a claim's volume at /data.
func groupPodYAML(name, claim string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2345}
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %s}
`, name, busyboxImage, claim)
}

const rawCSIPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: raw-csi}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sleep", "3600"]
    volumeDevices:
    - {name: raw, devicePath: /dev/xvdb}
  volumes:
  - name: raw
    persistentVolumeClaim: {claimName: csi-block}
`

// TestStorageDevicesAndGroups runs `mizzen server` with its agent on containerd and
// uses what upstream offers beyond directories: raw block volumes (a local volume on a
// loop device, and a CSI driver's block volume staged and published as a device) given
// to containers through volumeDevices, and a pod's fsGroup applied to CSI volumes as
// the CSIDriver's fsGroupPolicy says; a claim whose class does not allow expansion
// refused at admission, and a claim of an access mode its class cannot provision left
// Pending with the provisioner's reason.
func TestStorageDevicesAndGroups(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup not installed")
	}
	images := testImages(t)
	dataDir, err := os.MkdirTemp("", "stor7-devices-")
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := os.MkdirTemp("", "stor7-devices-scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(scratch); _ = os.RemoveAll(dataDir) })
	stageImages(t, dataDir, images, "agnhost.tar") // the CSI driver's image
	bridge := "mzn-st7a"
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", "10.195.0.0/16", "--service-cluster-ip-range", "10.196.0.0/16",
		"--pod-bridge", bridge, "--kubelet-port", strconv.Itoa(freePort(t)), "--disable", "ingress,dashboard,metrics-server")
	// The loop devices go after the cluster (cleanups run last-registered first).
	localDev := loopDevice(t, scratch, "local", "local-marker")
	csiDev := loopDevice(t, scratch, "csi", "csi-marker")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(c.log.String(), 80))
		}
		cleanupHost(t, c, dataDir, bridge)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	node := readyNode(t, t.Context(), client, dataDir, images)

	// A local volume on a block device: the pod sees the device, reads what is on it,
	// and what it writes reaches the device.
	c.kubectlStdin(localBlockYAML(node, localDev), "apply", "-f", "-")
	c.waitPod("default", "raw-local", 3*time.Minute, runningAndReady)
	if out := c.kubectl("exec", "raw-local", "--", "head", "-c", "12", "/dev/xvda"); out != "local-marker" {
		t.Errorf("the local block device starts with %q", out)
	}
	c.kubectl("exec", "raw-local", "--", "sh", "-c", "printf written-by-pod | dd of=/dev/xvda bs=512 seek=1 conv=fsync")
	if got := readAt(t, localDev, 512, len("written-by-pod")); got != "written-by-pod" {
		t.Errorf("the device holds %q where the pod wrote", got)
	}
	if out := c.kubectl("get", "pvc", "raw-local"); !rowHas(out, "raw-local", "Bound", "local-block") {
		t.Errorf("kubectl get pvc:\n%s", out)
	}
	// Its class allows no expansion (there is no such class): admission refuses.
	out, err := c.kubectlErr("patch", "pvc", "raw-local", "-p", `{"spec":{"resources":{"requests":{"storage":"8Mi"}}}}`)
	if err == nil || !strings.Contains(out, `persistentvolumeclaims "raw-local" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`) {
		t.Errorf("growing a claim whose class does not allow it: %v\n%s", err, out)
	}

	// A claim asking for a mode the class cannot give stays Pending, and says why.
	c.kubectlStdin(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared-wish}
spec:
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: shared-user}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: `+busyboxImage+`, command: ["sleep", "3600"], volumeMounts: [{name: data, mountPath: /data}]}
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: shared-wish}}
`, "apply", "-f", "-")
	eventually(t, 90*time.Second, func() error {
		out, err := c.kubectlErr("describe", "pvc", "shared-wish")
		if err != nil || !strings.Contains(out, "Pending") || !strings.Contains(out, "ProvisioningFailed") ||
			!strings.Contains(out, "access mode ReadWriteMany is not supported") {
			return fmt.Errorf("kubectl describe pvc: %v\n%s", err, out)
		}
		return nil
	})
	c.kubectl("delete", "pod", "shared-user", "--wait=true", "--timeout=60s")
	c.kubectl("delete", "pvc", "shared-wish", "--wait=true", "--timeout=60s")

	// The CSI driver, staging its volumes, with fsGroupPolicy File.
	kubeletDir := filepath.Join(dataDir, "agent", "kubelet")
	csiRoot := filepath.Join(scratch, "csi")
	for _, vol := range []string{"vol-file", "vol-none"} {
		if err := os.MkdirAll(filepath.Join(csiRoot, vol), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(csiRoot, vol, "hello"), []byte("hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deviceNode(t, csiDev, filepath.Join(csiRoot, "vol-block"))
	c.kubectlStdin(csiDriverObjectYAML("File"), "apply", "-f", "-")
	c.kubectlStdin(csiDriverPodYAML(kubeletDir, csiRoot, "--stage"), "apply", "-f", "-")
	c.waitPod("kube-system", "csi-hostpath-node", 2*time.Minute, runningAndReady)
	// Minutes, not seconds: beside another test on a loaded machine the registration
	// took over a minute; only whether it happens is under test.
	eventually(t, 3*time.Minute, func() error {
		if out, err := c.kubectlErr("get", "csinode", "-o", "jsonpath={.items[*].spec.drivers[*].name}"); err != nil || strings.TrimSpace(out) != csiDriverName {
			return fmt.Errorf("CSINode drivers: %v %q", err, out)
		}
		return nil
	})
	c.kubectlStdin(csiVolumesYAML, "apply", "-f", "-")
	c.kubectlStdin(groupPodYAML("group-file", "csi-file")+"---\n"+rawCSIPodYAML, "apply", "-f", "-")
	c.waitPod("default", "group-file", 3*time.Minute, runningAndReady)
	c.waitPod("default", "raw-csi", 3*time.Minute, runningAndReady)
	if out := strings.TrimSpace(c.kubectl("exec", "group-file", "--", "stat", "-c", "%g %A", "/data/hello")); out != "2345 -rw-rw-r--" {
		t.Errorf("under fsGroupPolicy File the volume's file is %q, want group 2345 with group rw", out)
	}
	if out := c.kubectl("exec", "raw-csi", "--", "head", "-c", "10", "/dev/xvdb"); out != "csi-marker" {
		t.Errorf("the CSI block device starts with %q", out)
	}

	// fsGroupPolicy None: the kubelet leaves the volume's files as they are.
	c.kubectl("delete", "csidriver", csiDriverName)
	c.kubectlStdin(csiDriverObjectYAML("None"), "apply", "-f", "-")
	c.kubectlStdin(groupPodYAML("group-none", "csi-none"), "apply", "-f", "-")
	c.waitPod("default", "group-none", 3*time.Minute, runningAndReady)
	if out := strings.TrimSpace(c.kubectl("exec", "group-none", "--", "stat", "-c", "%g %A", "/data/hello")); out != "0 -rw-r--r--" {
		t.Errorf("under fsGroupPolicy None the volume's file is %q, want it untouched", out)
	}

	// The pods go: every volume unpublished, then unstaged.
	c.kubectl("delete", "pod", "group-file", "group-none", "raw-csi", "--wait=true", "--timeout=60s")
	eventually(t, 60*time.Second, func() error {
		logs := c.kubectl("logs", "-n", "kube-system", "csi-hostpath-node")
		for _, want := range []string{"stage vol-block block\n", "publish vol-block block\n", "unpublish vol-block\n", "unstage vol-block\n",
			"stage vol-file\n", "publish vol-file\n", "unpublish vol-file\n", "unstage vol-file\n", "unstage vol-none\n"} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("the driver's calls lack %q:\n%s", want, logs)
			}
		}
		return nil
	})
	publishDir := filepath.Join(kubeletDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "csi-block")
	if entries, _ := os.ReadDir(publishDir); len(entries) != 0 {
		t.Errorf("block publications left in %s: %v", publishDir, entries)
	}
	c.kubectl("delete", "pod", "-n", "kube-system", "csi-hostpath-node", "--wait=true", "--timeout=60s")
}

// readAt reads n bytes of a device at offset.
func readAt(t *testing.T, dev string, offset int64, n int) string {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, offset); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package kubelet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStaticPodFromManifest(t *testing.T) {
	const yamlPod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  containers:\n  - name: c\n    image: agnhost:v1\n"
	tests := []struct {
		name, manifest, node   string
		wantName, wantNS       string
		wantErr                bool
		wantPull               v1.PullPolicy
		wantSameHashAsYAMLPod1 bool
	}{
		{name: "yaml", manifest: yamlPod, node: "node-1", wantName: "web-node-1", wantNS: "default", wantPull: v1.PullIfNotPresent, wantSameHashAsYAMLPod1: true},
		{name: "json in a namespace", manifest: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"etcd","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"etcd"}]}}`,
			node: "Node-2", wantName: "etcd-node-2", wantNS: "kube-system", wantPull: v1.PullAlways},
		{name: "same manifest on another node hashes differently", manifest: yamlPod, node: "node-2", wantName: "web-node-2", wantNS: "default", wantPull: v1.PullIfNotPresent},
		{name: "not a pod", manifest: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", node: "n", wantErr: true},
		{name: "no name", manifest: "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: i}]\n", node: "n", wantErr: true},
		{name: "no containers", manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", node: "n", wantErr: true},
		{name: "garbage", manifest: "{{{", node: "n", wantErr: true},
	}
	first, err := staticPodFromManifest([]byte(yamlPod), "node-1", epoch)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := staticPodFromManifest([]byte(tt.manifest), tt.node, epoch)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got pod %s, want an error", pod.Name)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Name != tt.wantName || pod.Namespace != tt.wantNS || pod.Spec.NodeName != tt.node {
				t.Errorf("pod %s/%s on %q, want %s/%s on %q", pod.Namespace, pod.Name, pod.Spec.NodeName, tt.wantNS, tt.wantName, tt.node)
			}
			if pod.Annotations[annoConfigSource] != "file" || pod.Annotations[annoConfigHash] != string(pod.UID) || len(pod.UID) != 32 {
				t.Errorf("annotations %v, uid %q", pod.Annotations, pod.UID)
			}
			if pod.Spec.RestartPolicy != v1.RestartPolicyAlways || pod.Spec.Containers[0].ImagePullPolicy != tt.wantPull {
				t.Errorf("restartPolicy %q, pull policy %q", pod.Spec.RestartPolicy, pod.Spec.Containers[0].ImagePullPolicy)
			}
			if (pod.UID == first.UID) != tt.wantSameHashAsYAMLPod1 {
				t.Errorf("hash %s vs the first pod's %s", pod.UID, first.UID)
			}
		})
	}
}

func TestStaticPodIsMirroredAndStops(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: agnhost:v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("kind: Pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := h.options()
	opts.PodManifestPath = dir
	h.startWith(opts)
	ctx := context.Background()

	mirror := h.waitPod("web-"+testNode, "mirror pod running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	hash := mirror.Annotations[annoConfigHash]
	if hash == "" || mirror.Annotations[annoConfigMirror] != hash || mirror.Annotations[annoConfigSource] != "file" {
		t.Errorf("mirror annotations %v", mirror.Annotations)
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != testNode || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("mirror owner references %+v", refs)
	}
	running := func() []*runtimeapi.Container {
		cs, err := h.rt.Client().ListContainers(ctx, &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if cs := running(); len(cs) != 1 || cs[0].Labels[labelPodUID] != hash {
		t.Fatalf("running containers %v, want one of pod %s", cs, hash)
	}
	containerID := running()[0].Id

	// Deleting the mirror pod brings it back; the static pod keeps running.
	if err := h.client.CoreV1().Pods("default").Delete(ctx, mirror.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("mirror pod recreated", func() bool {
		p, err := h.getPod(mirror.Name)
		return err == nil && p.Annotations[annoConfigMirror] == hash
	})
	if cs := running(); len(cs) != 1 || cs[0].Id != containerID {
		t.Errorf("containers after the mirror's deletion %v, want %s still running", cs, containerID)
	}

	// A restarted kubelet adopts the running static pod and keeps its mirror (marked
	// here, so a recreated one would show).
	current, err := h.getPod(mirror.Name)
	if err != nil {
		t.Fatal(err)
	}
	current.Labels = map[string]string{"marker": "kept"}
	if _, err := h.client.CoreV1().Pods("default").Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.startWith(opts)
	for range 30 {
		h.clock.Step(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	h.waitPod(mirror.Name, "mirror pod running after the restart", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if p, err := h.getPod(mirror.Name); err != nil || p.Labels["marker"] != "kept" {
		t.Errorf("mirror pod after the kubelet's restart: %v, labels %v; want the same pod", err, p.GetLabels())
	}
	if cs := running(); len(cs) != 1 || cs[0].Id != containerID {
		t.Errorf("containers after the kubelet's restart %v, want %s still running", cs, containerID)
	}

	// A changed manifest is a new pod: the old one stops as a deleted pod does, the
	// mirror follows the new.
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {version: two}\nspec:\n  containers:\n  - name: app\n    image: agnhost:v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var newHash string
	h.eventually("mirror of the changed manifest running, alone", func() bool {
		p, err := h.getPod(mirror.Name)
		if err != nil || p.Annotations[annoConfigMirror] == hash || p.Status.Phase != v1.PodRunning || p.Labels["version"] != "two" {
			return false
		}
		newHash = p.Annotations[annoConfigMirror]
		cs := running()
		return len(cs) == 1 && cs[0].Labels[labelPodUID] == newHash
	})
	if msg := h.waitEvent(mirror.Name, "Killing"); msg != "Stopping container app" {
		t.Errorf("Killing event %q, want %q", msg, "Stopping container app")
	}

	// Removing the manifest stops the pod as a deletion would, and removes its mirror.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	h.eventually("static pod stopped and mirror gone", func() bool {
		_, err := h.getPod(mirror.Name)
		return isNotFound(err) && len(running()) == 0
	})
	h.eventually("static pod's containers removed", func() bool {
		cs, err := h.rt.Client().ListContainers(ctx, nil)
		return err == nil && len(cs) == 0
	})
}

// A changed manifest replaces the pod only once the old one has terminated: upstream's
// kubelet never lets two pods of one full name overlap (host-network static pods would
// fight over their ports). The old pod's preStop hook blocks here, so the test sees the
// new pod wait for it.
func TestStaticPodReplacedAfterOldTerminates(t *testing.T) {
	hookCalled := make(chan struct{}, 1)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hookCalled <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hook.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	hookURL, err := url.Parse(hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	manifestFor := func(image string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 60
  containers:
  - name: etcd
    image: %s
    lifecycle:
      preStop:
        httpGet: {host: %q, port: %s, path: /stop}
`, image, hookURL.Hostname(), hookURL.Port()))
	}
	v1Manifest, v2Manifest := manifestFor("registry.local/etcd:3.5"), manifestFor("registry.local/etcd:3.6")
	oldPod, err := staticPodFromManifest(v1Manifest, testNode, epoch)
	if err != nil {
		t.Fatal(err)
	}
	newPod, err := staticPodFromManifest(v2Manifest, testNode, epoch)
	if err != nil {
		t.Fatal(err)
	}
	oldHash, newHash := string(oldPod.UID), string(newPod.UID)

	h := newHarness(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "etcd.yaml")
	if err := os.WriteFile(manifest, v1Manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := h.options()
	opts.PodManifestPath = dir
	h.startWith(opts)
	ctx := context.Background()
	name := "etcd-" + testNode

	h.waitPod(name, "mirror of the first manifest running", func(p *v1.Pod) bool {
		return p.Annotations[annoConfigMirror] == oldHash && p.Status.Phase == v1.PodRunning
	})
	containersOf := func(hash string) []*runtimeapi.Container {
		cs, err := h.rt.Client().ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: hash}})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	sandboxesOf := func(hash string) []*runtimeapi.PodSandbox {
		sbs, err := h.rt.Client().ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: hash}})
		if err != nil {
			t.Fatal(err)
		}
		return sbs
	}
	old := containersOf(oldHash)
	if len(old) != 1 || old[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("containers of the first manifest's pod: %v, want one running", old)
	}
	oldID := old[0].Id

	if err := os.WriteFile(manifest, v2Manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	h.eventually("the old pod's preStop hook called", func() bool {
		select {
		case <-hookCalled:
			return true
		default:
			return false
		}
	})
	// While the old pod is terminating, the new one has no sandbox and the mirror is
	// still the old pod's. The workers get many syncs' worth of time to misbehave.
	for range 50 {
		h.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
		if sbs := sandboxesOf(newHash); len(sbs) != 0 {
			t.Fatalf("new pod got sandbox %s while the old pod was still terminating", sbs[0].Id)
		}
	}
	if p, err := h.getPod(name); err != nil || p.Annotations[annoConfigMirror] != oldHash {
		t.Errorf("mirror pod while the old pod terminates: %v, annotations %v; want the old pod's", err, p.GetAnnotations())
	}
	close(release)

	mirror := h.waitPod(name, "mirror of the changed manifest running", func(p *v1.Pod) bool {
		return p.Annotations[annoConfigMirror] == newHash && p.Status.Phase == v1.PodRunning
	})
	if mirror.Annotations[annoConfigHash] != newHash || mirror.Spec.Containers[0].Image != "registry.local/etcd:3.6" {
		t.Errorf("mirror pod hash %q image %q, want %q %q", mirror.Annotations[annoConfigHash], mirror.Spec.Containers[0].Image, newHash, "registry.local/etcd:3.6")
	}
	sbs := sandboxesOf(newHash)
	if len(sbs) != 1 {
		t.Fatalf("sandboxes of the new pod: %v, want one", sbs)
	}
	stopped, created := -1, -1
	for i, c := range h.rt.CallLog() {
		switch {
		case c.Method == "StopContainer" && c.ID == oldID && stopped < 0:
			stopped = i
		case c.Method == "RunPodSandbox" && c.ID == sbs[0].Id:
			created = i
		}
	}
	if stopped < 0 || created < 0 || stopped > created {
		t.Errorf("old container stopped at call %d, new sandbox created at call %d; want the stop first", stopped, created)
	}
	h.eventually("only the new pod's container running", func() bool {
		oldCs, newCs := containersOf(oldHash), containersOf(newHash)
		for _, c := range oldCs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false
			}
		}
		return len(newCs) == 1 && newCs[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING
	})
}

// A manifest changed while the kubelet was down: the restarted kubelet finds the old
// pod's containers still running and stops them before it starts the new pod.
func TestStaticPodChangedWhileKubeletDown(t *testing.T) {
	manifestFor := func(image string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: apiserver\nspec:\n  hostNetwork: true\n  containers:\n  - name: apiserver\n    image: " + image + "\n")
	}
	v1Manifest, v2Manifest := manifestFor("registry.local/apiserver:1.36"), manifestFor("registry.local/apiserver:1.37")
	newPod, err := staticPodFromManifest(v2Manifest, testNode, epoch)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "apiserver.yaml")
	if err := os.WriteFile(manifest, v1Manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := h.options()
	opts.PodManifestPath = dir
	h.startWith(opts)
	ctx := context.Background()
	name := "apiserver-" + testNode
	h.waitPod(name, "mirror of the first manifest running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	running, err := h.rt.Client().ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil || len(running) != 1 {
		t.Fatalf("running containers %v (%v), want one", running, err)
	}
	oldID := running[0].Id

	h.stop()
	if err := os.WriteFile(manifest, v2Manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	h.startWith(opts)
	h.waitPod(name, "mirror of the changed manifest running", func(p *v1.Pod) bool {
		return p.Annotations[annoConfigMirror] == string(newPod.UID) && p.Status.Phase == v1.PodRunning
	})
	sbs, err := h.rt.Client().ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: string(newPod.UID)}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes of the new pod %v (%v), want one", sbs, err)
	}
	stopped, created := -1, -1
	for i, c := range h.rt.CallLog() {
		switch {
		case c.Method == "StopContainer" && c.ID == oldID && stopped < 0:
			stopped = i
		case c.Method == "RunPodSandbox" && c.ID == sbs[0].Id:
			created = i
		}
	}
	if stopped < 0 || created < 0 || stopped > created {
		t.Errorf("old container stopped at call %d, new sandbox created at call %d; want the stop first", stopped, created)
	}
}

package containerd

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/podcgroups"
	"mizzen/internal/testing/poll"
)

func TestConfig(t *testing.T) {
	cfg := Options{DataDir: "/var/lib/mizzen/containerd", StreamServerPort: 41234}.Config()
	for _, want := range []string{
		`root = "/var/lib/mizzen/containerd/root"`,
		`state = "/var/lib/mizzen/containerd/state"`,
		`address = "/var/lib/mizzen/containerd/containerd.sock"`,
		`sandbox_image = "registry.k8s.io/pause:3.10"`,
		`restrict_oom_score_adj = true`,
		`bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/var/lib/mizzen/containerd/cni/net.d"`,
		`snapshotter = "overlayfs"`,
		`SystemdCgroup = false`,
		`stream_server_address = "127.0.0.1"`,
		`stream_server_port = "41234"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
}

func TestCNIConfList(t *testing.T) {
	data, err := CNIConfList("10.244.3.0/24", "mizzen0", "/var/lib/mizzen/agent/cni-ipam", 1450)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type string `json:"type"`
			MTU  int    `json:"mtu"`
			IPAM struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" ||
		conf.Plugins[0].IPAM.Type != "host-local" || conf.Plugins[0].IPAM.Ranges[0][0]["subnet"] != "10.244.3.0/24" || conf.Plugins[0].MTU != 1450 {
		t.Errorf("conflist = %s", data)
	}
	if _, err := CNIConfList("not-a-cidr", "mizzen0", "/tmp/x", 0); err == nil {
		t.Error("accepted a bad CIDR")
	}
}

func TestOCIArchive(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteOCIArchive(&buf, PauseImage("registry.k8s.io/pause:3.10", []byte("binary"))); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %s %v", files["index.json"], err)
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != "registry.k8s.io/pause:3.10" || m.Annotations["org.opencontainers.image.ref.name"] != "3.10" {
		t.Errorf("index annotations %v", m.Annotations)
	}
	// Every blob is stored under its digest.
	for name, data := range files {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex != "" && digestOf(data) != "sha256:"+hex {
			t.Errorf("blob %s has digest %s", name, digestOf(data))
		}
	}
	if _, ok := files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]; !ok || string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Error("manifest blob or oci-layout missing")
	}
}

// TestPodRunsOnContainerd runs containerd with the generated configuration, imports the
// locally built pause image, and has a kubelet run a pod on it.
func TestPodRunsOnContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, bin := range []string{"containerd", "ctr", "runc", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install containerd runc containernetworking-plugins)", bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("CNI plugins not installed (apt-get install containernetworking-plugins)")
	}
	dir, err := os.MkdirTemp("", "mizzen-containerd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	pause := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pause, "./pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	pauseBin, err := os.ReadFile(pause)
	if err != nil {
		t.Fatal(err)
	}

	// A bridge of the test's own, removed afterwards: the host outlives the test.
	opts := Options{DataDir: filepath.Join(dir, "data"), Bridge: "mzntest0"}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "delete", opts.Bridge).Run()
		_ = RemoveMasquerade(opts.Bridge)
	})
	rtCtx, stopRuntime := context.WithCancel(context.Background())
	runtimeDone := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { runtimeDone <- Run(rtCtx, opts, log) }()
	t.Cleanup(func() {
		stopRuntime()
		<-runtimeDone
	})
	t.Logf("%s: pause built", time.Since(began))
	if err := WaitReady(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if err := opts.WriteCNIConfig("10.244.77.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := ImportImage(ctx, opts, PauseImage(DefaultSandboxImage, pauseBin)); err != nil {
		t.Fatal(err)
	}
	// The pod runs an image imported from a docker-archive tarball (what `docker save`
	// writes), the other format `mizzen image import` takes besides OCI archives.
	const dockerImage = "mizzen.local/docker-archive:v1"
	archive := filepath.Join(dir, "docker-archive.tar")
	if err := writeDockerArchive(archive, PauseImage(dockerImage, pauseBin)); err != nil {
		t.Fatal(err)
	}
	if err := ImportArchive(ctx, opts, archive); err != nil {
		t.Fatal(err)
	}
	rs, is, err := kubelet.ConnectRuntime(ctx, opts.Endpoint(), "")
	if err != nil {
		t.Fatal(err)
	}

	client := k8sfake.NewSimpleClientset()
	// Know when the kubelet's pod watch is registered: the fake clientset drops events
	// that happen between a list and its watch.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), action.(clienttesting.WatchActionImpl).ListOptions)
		once.Do(func() { close(watching) })
		return true, w, err
	})
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	klCtx, stopKubelet := context.WithCancel(ctx)
	kubeletDone := make(chan error, 1)
	go func() {
		kubeletDone <- kubelet.Run(klCtx, kubelet.Options{
			Client: client, NodeName: "real-node", Runtime: rs, Images: is, NodeIP: "10.0.0.1",
			Machine:      &kubelet.MachineInfo{CPUCores: 2, MemoryBytes: 4 << 30},
			PodLogsDir:   filepath.Join(dir, "pods"),
			RootDir:      filepath.Join(dir, "kubelet"),
			RelistPeriod: 200 * time.Millisecond,
			Logger:       log,
			PodCgroups:   cgroups,
		})
	}()
	defer func() {
		stopKubelet()
		<-kubeletDone
	}()
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("kubelet never watched pods")
	}
	t.Logf("%s: runtime ready, kubelet watching", time.Since(began))
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: "default", UID: "real-uid"},
		Spec: v1.PodSpec{
			NodeName:                      "real-node",
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []v1.Container{{
				Name: "app", Image: dockerImage, ImagePullPolicy: v1.PullNever,
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cgroups.RemovePod(pod.UID) }) // should the test fail before the kubelet removes it
	var got *v1.Pod
	waitFor(t, "pod Running on containerd", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "real", metav1.GetOptions{})
		got = p
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	t.Logf("%s: pod running", time.Since(began))
	cs := got.Status.ContainerStatuses[0]
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.State.Running == nil || !strings.HasPrefix(got.Status.PodIP, "10.244.77.") {
		t.Errorf("status: containerID %q state %+v podIP %q", cs.ContainerID, cs.State, got.Status.PodIP)
	}

	// Graceful deletion stops the containers on the real runtime and removes the pod.
	now := metav1.Now()
	got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, ptr.To[int64](2)
	if _, err := client.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod deleted", func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, "real", metav1.GetOptions{})
		return err != nil
	})
	waitFor(t, "sandbox removed", func() bool {
		sbs, err := rs.ListPodSandbox(ctx, nil)
		return err == nil && len(sbs) == 0
	})
	// runc leaves the pod's cgroup (its sandbox's parent) to the kubelet.
	waitFor(t, "pod cgroup removed", func() bool {
		left, err := cgroups.Pods()
		return err == nil && !slices.Contains(left, pod.UID)
	})
	t.Logf("%s: pod deleted, sandbox removed", time.Since(began))
}

// writeDockerArchive writes img as `docker save` does: manifest.json naming the config
// and the layer, the config as <digest>.json, the layer as <digest>/layer.tar.
func writeDockerArchive(path string, img Image) error {
	layer, err := layerTar(img.Files)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       imageConfig(img),
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
	})
	if err != nil {
		return err
	}
	configName := strings.TrimPrefix(digestOf(config), "sha256:") + ".json"
	layerName := strings.TrimPrefix(digestOf(layer), "sha256:") + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.Name}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {configName, config}, {layerName, layer}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 90*time.Second, 100*time.Millisecond, cond)
}

// TestOCIArchiveLayerAndConfig checks what a container sees of an image: the layer's
// files, links and directories, and the configuration's entrypoint, command and env.
func TestOCIArchiveLayerAndConfig(t *testing.T) {
	img := Image{
		Name: "mizzen.local/box:v1",
		Files: []File{
			{Path: "/bin/busybox", Mode: 0o755, Data: []byte("elf")},
			{Path: "/usr/bin/wget", Link: "/bin/busybox"},
			{Path: "/tmp", Mode: 0o1777, Dir: true},
		},
		Cmd: []string{"sh"},
		Env: []string{"PATH=/bin"},
	}
	var buf bytes.Buffer
	if err := WriteOCIArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for h, err := tr.Next(); err != io.EOF; h, err = tr.Next() {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		blobs[h.Name] = b
	}
	blob := func(digest string) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")] }
	var index struct{ Manifests []descriptor }
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct{ Entrypoint, Cmd, Env []string }
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.Config.Entrypoint != nil || strings.Join(config.Config.Cmd, " ") != "sh" || strings.Join(config.Config.Env, " ") != "PATH=/bin" {
		t.Errorf("image config %+v, want no entrypoint, cmd sh, env PATH=/bin", config.Config)
	}
	type entry struct {
		kind byte
		mode int64
		link string
	}
	got := map[string]entry{}
	lr := tar.NewReader(bytes.NewReader(blob(manifest.Layers[0].Digest)))
	for h, err := lr.Next(); err != io.EOF; h, err = lr.Next() {
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = entry{h.Typeflag, h.Mode, h.Linkname}
	}
	want := map[string]entry{
		"bin/":         {tar.TypeDir, 0o755, ""},
		"bin/busybox":  {tar.TypeReg, 0o755, ""},
		"usr/":         {tar.TypeDir, 0o755, ""},
		"usr/bin/":     {tar.TypeDir, 0o755, ""},
		"usr/bin/wget": {tar.TypeSymlink, 0o777, "/bin/busybox"},
		"tmp/":         {tar.TypeDir, 0o1777, ""},
	}
	if len(got) != len(want) {
		t.Errorf("layer entries %v, want %v", got, want)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("layer entry %s = %+v, want %+v", name, got[name], w)
		}
	}
}

// TestImportArchivesIn imports the tarballs of a directory through ctr (a script here
// that records its arguments) and nothing else.
func TestImportArchivesIn(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "calls")
	ctr := filepath.Join(dir, "ctr")
	script := "#!/bin/sh\necho \"$@\" >> " + record + "\ncase \"$*\" in *bad.tar) echo 'unrecognized image format' >&2; exit 1;; esac\n"
	if err := os.WriteFile(ctr, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images")
	for _, name := range []string{"a.tar", "b.tar", "notes.txt", ".hidden"} {
		if err := os.MkdirAll(images, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(images, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{DataDir: filepath.Join(dir, "containerd"), CtrPath: ctr}
	ctx := context.Background()

	imported, err := ImportArchivesIn(ctx, opts, images)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(images, "a.tar"), filepath.Join(images, "b.tar")}; strings.Join(imported, ",") != strings.Join(want, ",") {
		t.Errorf("imported %v, want %v", imported, want)
	}
	calls, _ := os.ReadFile(record)
	wantCall := "--address " + opts.Socket() + " -n k8s.io images import --snapshotter overlayfs " + filepath.Join(images, "a.tar")
	if lines := strings.Split(strings.TrimSpace(string(calls)), "\n"); len(lines) != 2 || lines[0] != wantCall {
		t.Errorf("ctr calls:\n%s\nwant the first to be %q", calls, wantCall)
	}

	if imported, err := ImportArchivesIn(ctx, opts, filepath.Join(dir, "missing")); err != nil || len(imported) != 0 {
		t.Errorf("missing directory: %v, %v; want nothing imported and no error", imported, err)
	}
	opts.Address = "/run/other/containerd.sock"
	err = ImportArchive(ctx, opts, filepath.Join(dir, "bad.tar"))
	if err == nil || !strings.Contains(err.Error(), "unrecognized image format") {
		t.Errorf("importing a bad archive: %v, want ctr's message", err)
	}
	if calls, _ := os.ReadFile(record); !strings.Contains(string(calls), "--address /run/other/containerd.sock ") {
		t.Errorf("Address was not used: %s", calls)
	}
}

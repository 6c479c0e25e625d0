package fake

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	testclock "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sandboxConfig(uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + uid, Namespace: "default", Uid: uid},
		Labels:   map[string]string{"io.kubernetes.pod.uid": uid},
	}
}

func containerConfig(name, image string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Labels:   map[string]string{"io.kubernetes.container.name": name},
	}
}

// startContainer runs a sandbox and one started container through the client.
func startContainer(t *testing.T, c Client, uid, name, image string) (sandboxID, containerID string) {
	t.Helper()
	ctx := context.Background()
	sb, err := c.RunPodSandbox(ctx, sandboxConfig(uid), "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, nil, nil); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	id, err := c.CreateContainer(ctx, sb, containerConfig(name, image), sandboxConfig(uid))
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sb, id
}

func TestContainerExitsAsConfigured(t *testing.T) {
	tests := []struct {
		name       string
		byName     *Behavior
		byImage    *Behavior
		advance    time.Duration
		wantState  runtimeapi.ContainerState
		wantCode   int32
		wantReason string
	}{
		{name: "runs until stopped by default", advance: time.Hour, wantState: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "exit not yet due", byName: &Behavior{Exits: true, After: time.Minute, ExitCode: 3},
			advance: 30 * time.Second, wantState: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "exit by container name", byName: &Behavior{Exits: true, After: time.Minute, ExitCode: 3},
			advance: time.Minute, wantState: runtimeapi.ContainerState_CONTAINER_EXITED, wantCode: 3, wantReason: "Error"},
		{name: "exit by image", byImage: &Behavior{Exits: true, ExitCode: 0},
			advance: time.Second, wantState: runtimeapi.ContainerState_CONTAINER_EXITED, wantReason: "Completed"},
		{name: "name wins over image", byName: &Behavior{}, byImage: &Behavior{Exits: true, ExitCode: 1},
			advance: time.Hour, wantState: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "reason override", byName: &Behavior{Exits: true, ExitCode: 137, Reason: "OOMKilled"},
			advance: time.Second, wantState: runtimeapi.ContainerState_CONTAINER_EXITED, wantCode: 137, wantReason: "OOMKilled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(epoch)
			rt := New(Options{Clock: clk})
			if tt.byName != nil {
				rt.SetContainerBehavior("app", *tt.byName)
			}
			if tt.byImage != nil {
				rt.SetImageBehavior("busybox", *tt.byImage) // normalized: docker.io/library/busybox:latest
			}
			_, id := startContainer(t, rt.Client(), "u1", "app", "docker.io/library/busybox:latest")
			clk.Step(tt.advance)
			resp, err := rt.Client().ContainerStatus(context.Background(), id, false)
			if err != nil {
				t.Fatal(err)
			}
			st := resp.Status
			if st.State != tt.wantState || st.ExitCode != tt.wantCode || st.Reason != tt.wantReason {
				t.Fatalf("got state=%v exit=%d reason=%q, want %v %d %q", st.State, st.ExitCode, st.Reason, tt.wantState, tt.wantCode, tt.wantReason)
			}
			if st.StartedAt != epoch.UnixNano() {
				t.Errorf("startedAt = %d, want %d", st.StartedAt, epoch.UnixNano())
			}
			if tt.wantState == runtimeapi.ContainerState_CONTAINER_EXITED && st.FinishedAt <= st.StartedAt {
				t.Errorf("finishedAt %d not after startedAt %d", st.FinishedAt, st.StartedAt)
			}
			if st.ImageRef != "docker.io/library/busybox@"+st.ImageId || st.ImageId == "" {
				t.Errorf("imageRef %q imageId %q", st.ImageRef, st.ImageId)
			}
		})
	}
}

func TestListFilters(t *testing.T) {
	rt := New(Options{})
	c := rt.Client()
	ctx := context.Background()
	sb1, c1 := startContainer(t, c, "u1", "a", "nginx")
	_, c2 := startContainer(t, c, "u2", "b", "nginx")
	if err := c.StopContainer(ctx, c2, 30); err != nil {
		t.Fatal(err)
	}
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	tests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, []string{c1, c2}},
		{"by id", &runtimeapi.ContainerFilter{Id: c2}, []string{c2}},
		{"by sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb1}, []string{c1}},
		{"by state", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: running}}, []string{c1}},
		{"by label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "b"}}, []string{c2}},
		{"no match", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"x": "y"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.ListContainers(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, g := range got {
				ids[g.Id] = true
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d containers, want %d", len(got), len(tt.want))
			}
			for _, w := range tt.want {
				if !ids[w] {
					t.Errorf("missing %s", w)
				}
			}
		})
	}
	sbs, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u2"}})
	if err != nil || len(sbs) != 1 || sbs[0].Metadata.Uid != "u2" {
		t.Fatalf("sandbox by label: %v %v", sbs, err)
	}
}

func TestStopAndRemove(t *testing.T) {
	rt := New(Options{})
	c := rt.Client()
	ctx := context.Background()
	sb, id := startContainer(t, c, "u1", "app", "nginx")
	if err := c.RemoveContainer(ctx, id); err == nil {
		t.Fatal("removing a running container succeeded")
	}
	if err := c.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	st, err := c.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 137 {
		t.Fatalf("after sandbox stop: %v exit %d", st.Status.State, st.Status.ExitCode)
	}
	sst, err := c.PodSandboxStatus(ctx, sb, false)
	if err != nil || sst.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox status %v %v", sst, err)
	}
	if err := c.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerStatus(ctx, id, false); err == nil {
		t.Fatal("container survived its sandbox's removal")
	}
	if got, _ := c.ListPodSandbox(ctx, nil); len(got) != 0 {
		t.Fatalf("%d sandboxes left", len(got))
	}
}

func TestCreateNeedsPulledImage(t *testing.T) {
	rt := New(Options{})
	c := rt.Client()
	ctx := context.Background()
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("u1"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateContainer(ctx, sb, containerConfig("app", "nginx:1.27"), nil); err == nil {
		t.Fatal("created a container from an image never pulled")
	}
	rt.SetPullError("nginx:1.27", errors.New("pull access denied"))
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, nil, nil); err == nil {
		t.Fatal("pull succeeded despite the configured error")
	}
	rt.SetPullError("nginx:1.27", nil)
	ref, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "docker.io/library/nginx:1.27"}, false)
	if err != nil || st.Image == nil || st.Image.Id != ref {
		t.Fatalf("image status %v %v, want id %s", st, err, ref)
	}
	if err := c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: ref}); err != nil {
		t.Fatal(err)
	}
	if imgs, _ := c.ListImages(ctx, nil); len(imgs) != 0 {
		t.Fatalf("images left after remove: %v", imgs)
	}
}

func TestExecSyncResult(t *testing.T) {
	rt := New(Options{})
	c := rt.Client()
	_, id := startContainer(t, c, "u1", "app", "nginx")
	out, _, err := c.ExecSync(context.Background(), id, []string{"cat", "/ready"}, time.Second)
	if err != nil || len(out) != 0 {
		t.Fatalf("default exec: %q %v", out, err)
	}
	rt.SetContainerBehavior("app", Behavior{ExecExitCode: 2, ExecStdout: "no"})
	out, _, err = c.ExecSync(context.Background(), id, []string{"cat", "/ready"}, time.Second)
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 2 || string(out) != "no" {
		t.Fatalf("failing exec: out %q err %v", out, err)
	}
	rt.SetContainerBehavior("app", Behavior{ExecHangs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, _, err = c.ExecSync(ctx, id, []string{"sleep", "10"}, time.Second)
	if !errors.Is(err, remote.ErrCommandTimedOut) || err.Error() != `command timed out: "sleep 10" timed out after 1s` {
		t.Fatalf("hanging exec: err %v, want cri-client's timeout", err)
	}
}

func TestStats(t *testing.T) {
	clk := testclock.NewFakeClock(epoch)
	rt := New(Options{Clock: clk})
	c := rt.Client()
	sb, id := startContainer(t, c, "u1", "app", "nginx")
	clk.Step(10 * time.Second)
	cs, err := c.ContainerStats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Cpu.UsageCoreNanoSeconds.Value != uint64(10*time.Second/100) || cs.Memory.WorkingSetBytes.Value < 4*mib {
		t.Fatalf("container stats: cpu %d mem %d", cs.Cpu.UsageCoreNanoSeconds.Value, cs.Memory.WorkingSetBytes.Value)
	}
	ps, err := c.PodSandboxStats(context.Background(), sb)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Linux.Containers) != 1 || ps.Linux.Memory.WorkingSetBytes.Value != cs.Memory.WorkingSetBytes.Value ||
		ps.Linux.Process.ProcessCount.Value != 2 {
		t.Fatalf("sandbox stats: %v", ps)
	}
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                      "docker.io/library/nginx:latest",
		"nginx:1.27":                 "docker.io/library/nginx:1.27",
		"bitnami/redis":              "docker.io/bitnami/redis:latest",
		"registry.k8s.io/pause:3.10": "registry.k8s.io/pause:3.10",
		"localhost:5000/app":         "localhost:5000/app:latest",
		"localhost/app@sha256:abc":   "localhost/app@sha256:abc",
	} {
		if got := normalizeImage(in); got != want {
			t.Errorf("normalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServeOverUnixSocket(t *testing.T) {
	rt := New(Options{RuntimeName: "containerd"})
	rt.SetContainerBehavior("app", Behavior{Exits: true, ExitCode: 4})
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	endpoint := "unix://" + sock
	deadline := time.Now().Add(30 * time.Second)
	for {
		svc, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(10 * time.Second).Build(ctx)
		if err == nil {
			v, verr := svc.Version(ctx, "v1")
			if verr == nil {
				if v.RuntimeName != "containerd" {
					t.Fatalf("runtime name %q", v.RuntimeName)
				}
				runWithRemote(t, svc, endpoint)
				return
			}
			err = verr
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote runtime: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runWithRemote drives a pod through the real CRI client over the socket.
func runWithRemote(t *testing.T, rs cri.RuntimeService, endpoint string) {
	t.Helper()
	ctx := context.Background()
	is, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(10 * time.Second).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	sb, err := rs.RunPodSandbox(ctx, sandboxConfig("u1"), "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	id, err := rs.CreateContainer(ctx, sb, containerConfig("app", "busybox"), sandboxConfig("u1"))
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := rs.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	// The container exits 4 right after its start; poll, as the real clock moves on.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rs.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if st.Status.ExitCode != 4 || st.Status.Reason != "Error" {
				t.Fatalf("exit %d reason %q, want 4 Error", st.Status.ExitCode, st.Status.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container never exited: %v", st.Status.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sst, err := rs.PodSandboxStatus(ctx, sb, false)
	if err != nil || sst.Status.Network.GetIp() != "10.88.0.1" {
		t.Fatalf("sandbox status %v %v, want ip 10.88.0.1", sst, err)
	}
	stats, err := rs.ListPodSandboxStats(ctx, nil)
	if err != nil || len(stats) != 1 {
		t.Fatalf("ListPodSandboxStats: %v %v", stats, err)
	}
}

// TestListByPodUID checks that lists selecting a pod UID (served from the by-pod
// index) return what filtering every record returns, through creations and removals,
// records without the label included.
func TestListByPodUID(t *testing.T) {
	ctx := context.Background()
	r := New(Options{Clock: testclock.NewFakeClock(epoch)})
	c := r.Client()
	var sandboxes []string
	var containers []string
	for i, uid := range []string{"a", "b", "a", "c"} {
		sb, _ := startContainer(t, c, uid, fmt.Sprintf("c%d", i), "busybox") // a container without the pod label
		cfg := containerConfig(fmt.Sprintf("d%d", i), "busybox")
		cfg.Labels["io.kubernetes.pod.uid"] = uid
		id, err := c.CreateContainer(ctx, sb, cfg, sandboxConfig(uid))
		if err != nil {
			t.Fatal(err)
		}
		sandboxes, containers = append(sandboxes, sb), append(containers, id)
	}
	unlabelled, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "x", Uid: "x"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	unlabelledC, err := c.CreateContainer(ctx, unlabelled, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "x"},
		Image: &runtimeapi.ImageSpec{Image: "busybox"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		allSB, err := c.ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		allC, err := c.ListContainers(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, uid := range []string{"a", "b", "c", "d", ""} {
			sel := map[string]string{"io.kubernetes.pod.uid": uid}
			var wantSB, wantC []string
			for _, sb := range allSB {
				if sb.Labels["io.kubernetes.pod.uid"] == uid {
					wantSB = append(wantSB, sb.Id)
				}
			}
			for _, ctr := range allC {
				if ctr.Labels["io.kubernetes.pod.uid"] == uid {
					wantC = append(wantC, ctr.Id)
				}
			}
			gotSB, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			gotC, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			ids := func(n int, id func(int) string) []string {
				var out []string
				for i := range n {
					out = append(out, id(i))
				}
				slices.Sort(out)
				return out
			}
			slices.Sort(wantSB)
			slices.Sort(wantC)
			if got := ids(len(gotSB), func(i int) string { return gotSB[i].Id }); !slices.Equal(got, wantSB) {
				t.Errorf("%s: sandboxes of pod %q: %v, want %v", step, uid, got, wantSB)
			}
			if got := ids(len(gotC), func(i int) string { return gotC[i].Id }); !slices.Equal(got, wantC) {
				t.Errorf("%s: containers of pod %q: %v, want %v", step, uid, got, wantC)
			}
		}
	}
	check("created")
	if err := c.StopContainer(ctx, containers[0], 0); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveContainer(ctx, containers[0]); err != nil {
		t.Fatal(err)
	}
	check("a container removed")
	if err := c.StopPodSandbox(ctx, sandboxes[2]); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePodSandbox(ctx, sandboxes[2]); err != nil {
		t.Fatal(err)
	}
	check("a sandbox removed with its container")
	for _, id := range []string{unlabelledC} {
		if err := c.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	check("an unlabelled container removed")
	if n := len(r.podSandboxes["a"]) + len(r.podContainers["a"]); n != 1 {
		t.Errorf("pod a has %d indexed records, want 1 (its first sandbox)", n)
	}
}

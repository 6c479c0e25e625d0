package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
)

// TestContainerdPullsThroughTheMirror pulls, through the CRI, an image of a registry
// that does not exist from this registry, mirrored to it as --private-registry does.
func TestContainerdPullsThroughTheMirror(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install containerd runc)", bin)
		}
	}
	const ref = "registry.invalid/e2e-test-images/kitten:1.8"
	srv := serveImage(t, ref)
	defer srv.Close()

	dir, err := os.MkdirTemp("", "mizzen-registry-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := containerd.Options{DataDir: dir, Registries: &containerd.Registries{
		Mirrors: map[string]containerd.Mirror{"registry.invalid": {Endpoints: []string{srv.URL}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done, err := containerd.Start(runCtx, opts, nil, []byte("not run"))
	defer func() { stop(); <-done }()
	if err != nil {
		t.Fatal(err)
	}
	rs, is, err := kubelet.ConnectRuntime(ctx, opts.Endpoint(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	pulled, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil)
	if err != nil {
		t.Fatalf("pulling %s through the mirror: %v", ref, err)
	}
	st, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image status: %v %v", st, err)
	}
	if st.Image.Id != pulled || len(st.Image.RepoDigests) == 0 || !strings.HasPrefix(st.Image.RepoDigests[0], "registry.invalid/e2e-test-images/kitten@sha256:") {
		t.Errorf("pulled %q; status id %q repo digests %v", pulled, st.Image.Id, st.Image.RepoDigests)
	}
}

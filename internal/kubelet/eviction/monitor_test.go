package eviction

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
)

// runContainer starts one container of the pod in the fake runtime, labelled as the
// kubelet labels its containers.
func runContainer(t *testing.T, rt *fake.Runtime, pod *v1.Pod, name string) {
	t.Helper()
	ctx := context.Background()
	c := rt.Client()
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:   map[string]string{labelPodUID: string(pod.UID)},
	}
	sb, err := c.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "img"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "img"},
		Labels:   map[string]string{labelPodUID: string(pod.UID), labelContainerName: name},
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMonitorSync(t *testing.T) {
	tests := []struct {
		name string
		// setUp prepares the pod's files and runtime state given its directories.
		pod   *v1.Pod
		setUp func(t *testing.T, rt *fake.Runtime, emptyDir, logDir func(string) string)
		want  string
	}{{
		name: "an emptyDir file past the sizeLimit",
		pod:  pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("app", "")),
		setUp: func(t *testing.T, _ *fake.Runtime, emptyDir, _ func(string) string) {
			writeFile(t, filepath.Join(emptyDir("scratch"), "sub", "big"), 2*mi)
		},
		want: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
	}, {
		name: "an emptyDir file within the sizeLimit",
		pod:  pod([]v1.Volume{emptyDir("scratch", "4Mi", "")}, container("app", "")),
		setUp: func(t *testing.T, _ *fake.Runtime, emptyDir, _ func(string) string) {
			writeFile(t, filepath.Join(emptyDir("scratch"), "big"), 2*mi)
		},
	}, {
		name: "a container's writable layer and logs past its limit",
		pod:  pod(nil, container("app", "2Mi"), container("other", "8Mi")),
		setUp: func(t *testing.T, rt *fake.Runtime, _, logDir func(string) string) {
			rt.SetContainerBehavior("app", fake.Behavior{WritableLayerBytes: mi + mi/2})
			writeFile(t, filepath.Join(logDir("app"), "0.log"), mi)
		},
		want: `Container app exceeded its local ephemeral storage limit "2Mi". `,
	}, {
		name: "a container's writable layer within its limit",
		pod:  pod(nil, container("app", "2Mi")),
		setUp: func(t *testing.T, rt *fake.Runtime, _, _ func(string) string) {
			rt.SetContainerBehavior("app", fake.Behavior{WritableLayerBytes: mi})
		},
	}, {
		name: "a pod without limits is left alone",
		pod:  pod([]v1.Volume{emptyDir("scratch", "", "")}, container("app", "")),
		setUp: func(t *testing.T, rt *fake.Runtime, emptyDir, _ func(string) string) {
			rt.SetContainerBehavior("app", fake.Behavior{WritableLayerBytes: 1 << 40})
			writeFile(t, filepath.Join(emptyDir("scratch"), "big"), 2*mi)
		},
	}, {
		name: "a system-critical pod is never evicted",
		pod: func() *v1.Pod {
			p := pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("app", ""))
			p.Spec.Priority = ptr.To[int32](systemCriticalPriority)
			return p
		}(),
		setUp: func(t *testing.T, _ *fake.Runtime, emptyDir, _ func(string) string) {
			writeFile(t, filepath.Join(emptyDir("scratch"), "big"), 2*mi)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			pod := tt.pod
			pod.ObjectMeta = metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID("uid-p")}
			clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			rt := fake.New(fake.Options{Clock: clk})
			for _, c := range pod.Spec.Containers {
				runContainer(t, rt, pod, c.Name)
			}
			emptyDirPath := func(p *v1.Pod, vol string) string {
				return filepath.Join(root, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", vol)
			}
			logDir := func(p *v1.Pod) string { return filepath.Join(root, "logs", string(p.UID)) }
			tt.setUp(t, rt,
				func(vol string) string { return emptyDirPath(pod, vol) },
				func(c string) string { return filepath.Join(logDir(pod), c) })

			evicted := map[types.UID]string{}
			m, err := New(Options{
				Runtime: rt.Client(), Pods: func() []*v1.Pod { return []*v1.Pod{pod} },
				EmptyDirPath: emptyDirPath, LogDir: logDir,
				Evict:  func(p *v1.Pod, msg string) { evicted[p.UID] = msg },
				Clock:  clk,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			m.Sync(context.Background())
			if got := evicted[pod.UID]; got != tt.want {
				t.Errorf("eviction message %q, want %q", got, tt.want)
			}
			if len(evicted) > 1 {
				t.Errorf("evicted %v, want at most the one pod", evicted)
			}
		})
	}
}

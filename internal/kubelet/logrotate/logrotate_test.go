package logrotate

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// fakeRuntime answers the three CRI calls the rotation makes. Like a real runtime, a
// reopen creates a fresh empty file at the container's log path.
type fakeRuntime struct {
	mu         sync.Mutex
	containers map[string]fakeContainer
	reopenErr  error
	reopened   []string
}

type fakeContainer struct {
	logPath string
	state   runtimeapi.ContainerState
}

func (r *fakeRuntime) ListContainers(_ context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The filter is ignored on purpose: the Manager must skip stopped containers itself.
	var out []*runtimeapi.Container
	for id, c := range r.containers {
		out = append(out, &runtimeapi.Container{Id: id, State: c.state})
	}
	return out, nil
}

func (r *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, errors.New("not found")
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: c.state, LogPath: c.logPath}}, nil
}

func (r *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reopened = append(r.reopened, id)
	if r.reopenErr != nil {
		return r.reopenErr
	}
	f, err := os.OpenFile(r.containers[id].logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

func (r *fakeRuntime) reopenCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reopened)
}

var epoch = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

// setup makes a log directory with one running container "c1" logging to 0.log.
func setup(t *testing.T, opts Options) (*Manager, *fakeRuntime, *testclock.FakeClock, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "default_pod_uid", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{containers: map[string]fakeContainer{
		"c1": {logPath: path, state: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}}
	clk := testclock.NewFakeClock(epoch)
	opts.Runtime, opts.Clock = rt, clk
	opts.Logger = slog.New(slog.DiscardHandler)
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, rt, clk, path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return string(b)
}

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func TestRotateOneFile(t *testing.T) {
	for _, tc := range []struct {
		name        string
		content     string
		state       runtimeapi.ContainerState
		wantFiles   []string
		wantReopens int
	}{
		{name: "over the limit", content: strings.Repeat("x", 100), state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			wantFiles: []string{"0.log", "0.log.20261130-070000"}, wantReopens: 1},
		{name: "exactly the limit", content: strings.Repeat("x", 64), state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			wantFiles: []string{"0.log", "0.log.20261130-070000"}, wantReopens: 1},
		{name: "under the limit", content: strings.Repeat("x", 63), state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			wantFiles: []string{"0.log"}},
		{name: "stopped container", content: strings.Repeat("x", 100), state: runtimeapi.ContainerState_CONTAINER_EXITED,
			wantFiles: []string{"0.log"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rt, _, path := setup(t, Options{MaxSize: 64, MaxFiles: 3})
			rt.containers["c1"] = fakeContainer{logPath: path, state: tc.state}
			writeFile(t, path, tc.content)
			if err := m.RotateLogs(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := listDir(t, filepath.Dir(path)); !slices.Equal(got, tc.wantFiles) {
				t.Errorf("files: got %v, want %v", got, tc.wantFiles)
			}
			if got := rt.reopenCount(); got != tc.wantReopens {
				t.Errorf("reopens: got %d, want %d", got, tc.wantReopens)
			}
			if tc.wantReopens == 0 {
				if got := readFile(t, path); got != tc.content {
					t.Errorf("current log changed: got %q", got)
				}
				return
			}
			if got := readFile(t, path); got != "" {
				t.Errorf("current log after rotation: got %q, want empty", got)
			}
			if got := readFile(t, path+".20261130-070000"); got != tc.content {
				t.Errorf("rotated log: got %q, want %q", got, tc.content)
			}
		})
	}
}

// TestRotationKeepsMaxFiles rotates many times and checks after each pass that at
// most MaxFiles files exist, that only the newest rotated file is uncompressed, and
// that what is kept is the newest content.
func TestRotationKeepsMaxFiles(t *testing.T) {
	for _, maxFiles := range []int{2, 3, 5} {
		t.Run(strings.Repeat("I", maxFiles), func(t *testing.T) {
			m, _, clk, path := setup(t, Options{MaxSize: 10, MaxFiles: maxFiles})
			dir := filepath.Dir(path)
			var written []string // content of each generation, oldest first
			for gen := range 8 {
				content := strings.Repeat(string(rune('a'+gen)), 20)
				written = append(written, content)
				writeFile(t, path, content)
				if err := m.RotateLogs(context.Background()); err != nil {
					t.Fatalf("pass %d: %v", gen, err)
				}
				files := listDir(t, dir)
				if len(files) > maxFiles {
					t.Fatalf("pass %d: %d files %v, want at most %d", gen, len(files), files, maxFiles)
				}
				rotated := files[1:] // files[0] is 0.log: it sorts first
				if files[0] != "0.log" {
					t.Fatalf("pass %d: no current log in %v", gen, files)
				}
				for i, f := range rotated {
					newest := i == len(rotated)-1
					if gz := strings.HasSuffix(f, ".gz"); gz == newest {
						t.Errorf("pass %d: %s compressed=%v, want only the newest rotated file uncompressed", gen, f, gz)
					}
				}
				// The rotated files hold the newest generations, in order.
				wantContents := written[max(0, len(written)-len(rotated)):]
				for i, f := range rotated {
					if got := readFile(t, filepath.Join(dir, f)); got != wantContents[i] {
						t.Errorf("pass %d: %s holds %q, want %q", gen, f, got, wantContents[i])
					}
				}
				if want := min(len(written), maxFiles-1); len(rotated) != want {
					t.Errorf("pass %d: %d rotated files, want %d", gen, len(rotated), want)
				}
				clk.Step(10 * time.Second)
			}
		})
	}
}

func TestFailedReopenRestoresTheLog(t *testing.T) {
	m, rt, _, path := setup(t, Options{MaxSize: 10, MaxFiles: 3})
	rt.reopenErr = errors.New("runtime says no")
	writeFile(t, path, "the only copy of this log")
	err := m.RotateLogs(context.Background())
	if err == nil || !strings.Contains(err.Error(), "runtime says no") {
		t.Fatalf("got error %v, want the reopen's", err)
	}
	if got := listDir(t, filepath.Dir(path)); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files: got %v, want only 0.log", got)
	}
	if got := readFile(t, path); got != "the only copy of this log" {
		t.Errorf("log after failed reopen: got %q", got)
	}

	// Once the runtime recovers, the next pass rotates.
	rt.reopenErr = nil
	if err := m.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, filepath.Dir(path)); !slices.Equal(got, []string{"0.log", "0.log.20261130-070000"}) {
		t.Errorf("files after recovery: got %v", got)
	}
}

func TestLeftoversAreRemoved(t *testing.T) {
	m, _, _, path := setup(t, Options{MaxSize: 10, MaxFiles: 5})
	dir := filepath.Dir(path)
	// An interrupted compression of an older file (its .tmp), and a finished one whose
	// source was not removed yet.
	writeFile(t, path+".20261130-060000.gz.tmp", "half")
	writeFile(t, path+".20261130-060000", "older")
	writeFile(t, path+".20261130-050000", "oldest")
	gz := path + ".20261130-050000.gz"
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("oldest"))
	zw.Close()
	if err := os.WriteFile(gz, buf.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "current content")
	if err := m.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.log", "0.log.20261130-050000.gz", "0.log.20261130-060000.gz", "0.log.20261130-070000"}
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files: got %v, want %v", got, want)
	}
	for f, content := range map[string]string{want[1]: "oldest", want[2]: "older", want[3]: "current content"} {
		if got := readFile(t, filepath.Join(dir, f)); got != content {
			t.Errorf("%s: got %q, want %q", f, got, content)
		}
	}
}

func TestMissingLogIsReopened(t *testing.T) {
	m, rt, _, path := setup(t, Options{MaxSize: 10})
	if err := m.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.reopenCount() != 1 {
		t.Errorf("reopens: got %d, want 1", rt.reopenCount())
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("log not recreated: %v", err)
	}
}

func TestSameSecondDoesNotOverwrite(t *testing.T) {
	m, _, _, path := setup(t, Options{MaxSize: 10, MaxFiles: 5})
	writeFile(t, path, "first generation")
	if err := m.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "second generation")
	if err := m.RotateLogs(context.Background()); err == nil {
		t.Fatal("a second rotation within the same second succeeded")
	}
	if got := readFile(t, path); got != "second generation" {
		t.Errorf("current log: got %q", got)
	}
	if got := readFile(t, path+".20261130-070000.gz"); got != "first generation" {
		t.Errorf("first rotation: got %q", got)
	}
}

func TestRunRotatesEveryInterval(t *testing.T) {
	m, rt, clk, path := setup(t, Options{MaxSize: 10, MonitorInterval: time.Minute})
	writeFile(t, path, strings.Repeat("y", 50))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(30 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never started its ticker")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Nothing happens before the first interval has passed.
	if rt.reopenCount() != 0 {
		t.Fatalf("rotated before the interval")
	}
	clk.Step(59 * time.Second)
	for rt.reopenCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("log not rotated after the interval")
		}
		// Step until the ticker is waiting and fires (it may not be registered yet).
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(path + "." + clk.Now().Format(timestampFormat)); err != nil {
		t.Errorf("rotated file: %v", err)
	}
}

func TestNew(t *testing.T) {
	rt := &fakeRuntime{}
	for _, tc := range []struct {
		name    string
		opts    Options
		want    Options
		wantErr string
	}{
		{name: "defaults", opts: Options{Runtime: rt},
			want: Options{MaxSize: 10 << 20, MaxFiles: 5, MaxWorkers: 1, MonitorInterval: 10 * time.Second}},
		{name: "set", opts: Options{Runtime: rt, MaxSize: 1, MaxFiles: 2, MaxWorkers: 3, MonitorInterval: 3 * time.Second},
			want: Options{MaxSize: 1, MaxFiles: 2, MaxWorkers: 3, MonitorInterval: 3 * time.Second}},
		{name: "one file", opts: Options{Runtime: rt, MaxFiles: 1}, wantErr: "must be at least 2"},
		{name: "negative workers", opts: Options{Runtime: rt, MaxWorkers: -1}, wantErr: "must be at least 1"},
		{name: "interval too short", opts: Options{Runtime: rt, MonitorInterval: time.Second}, wantErr: "must be at least 3s"},
		{name: "negative interval", opts: Options{Runtime: rt, MonitorInterval: -time.Minute}, wantErr: "must be at least 3s"},
		{name: "no runtime", opts: Options{}, wantErr: "Runtime is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := m.opts
			if got.MaxSize != tc.want.MaxSize || got.MaxFiles != tc.want.MaxFiles ||
				got.MaxWorkers != tc.want.MaxWorkers || got.MonitorInterval != tc.want.MonitorInterval {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	m, rt, _, path := setup(t, Options{MaxSize: -1})
	writeFile(t, path, strings.Repeat("z", 1<<10))
	if m.Enabled() {
		t.Error("a negative max size should disable rotation")
	}
	if err := m.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.reopenCount() != 0 || !slices.Equal(listDir(t, filepath.Dir(path)), []string{"0.log"}) {
		t.Error("a disabled manager rotated")
	}
}

func TestParseMaxSize(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "10Mi", want: 10 << 20},
		{in: "1Gi", want: 1 << 30},
		{in: "500", want: 500},
		{in: "1k", want: 1000},
		{in: "-1", want: -1},
		{in: "ten", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := ParseMaxSize(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseMaxSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

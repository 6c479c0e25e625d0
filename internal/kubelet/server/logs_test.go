package server

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mizzen/internal/testing/lockedbuf"
)

func TestParseCRILogLine(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    logEntry
		wantErr bool
	}{
		{line: "2026-01-02T03:04:05.123456789Z stdout F hello world",
			want: logEntry{time: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC), stream: "stdout", content: []byte("hello world")}},
		{line: "2026-01-02T03:04:05Z stderr P half a li",
			want: logEntry{time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), stream: "stderr", partial: true, content: []byte("half a li")}},
		{line: "2026-01-02T03:04:05Z stdout F:extra  two spaces kept",
			want: logEntry{time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), stream: "stdout", content: []byte(" two spaces kept")}},
		{line: "2026-01-02T03:04:05Z stdout F",
			want: logEntry{time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), stream: "stdout"}},
		{line: "not-a-time stdout F x", wantErr: true},
		{line: "2026-01-02T03:04:05Z stdin F x", wantErr: true},
		{line: "2026-01-02T03:04:05Z stdout X x", wantErr: true},
		{line: "plain text", wantErr: true},
	} {
		got, err := parseCRILogLine([]byte(tc.line))
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err %v, want error %v", tc.line, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if !got.time.Equal(tc.want.time) || got.stream != tc.want.stream || got.partial != tc.want.partial || string(got.content) != string(tc.want.content) {
			t.Errorf("%q: got %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

// sampleLog has four lines, one split by the runtime, and one the reader skips.
const sampleLog = `2026-01-02T03:04:01Z stdout F one
2026-01-02T03:04:02.5Z stderr F two
garbage that is not a log line
2026-01-02T03:04:03Z stdout P thr
2026-01-02T03:04:03.1Z stdout F ee
2026-01-02T03:04:04Z stdout F four
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadLogs(t *testing.T) {
	path := writeLog(t, sampleLog)
	for _, tc := range []struct {
		name string
		opts LogOptions
		want string
	}{
		{"everything", LogOptions{Tail: -1}, "one\ntwo\nthree\nfour\n"},
		{"tail of two file lines", LogOptions{Tail: 2}, "ee\nfour\n"},
		{"tail of one", LogOptions{Tail: 1}, "four\n"},
		{"tail of zero", LogOptions{Tail: 0}, ""},
		{"tail beyond the file", LogOptions{Tail: 100}, "one\ntwo\nthree\nfour\n"},
		{"since", LogOptions{Tail: -1, Since: time.Date(2026, 1, 2, 3, 4, 2, 0, time.UTC)}, "two\nthree\nfour\n"},
		{"since after everything", LogOptions{Tail: -1, Since: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}, ""},
		{"timestamps", LogOptions{Tail: 2, Timestamps: true}, "2026-01-02T03:04:03.1Z ee\n2026-01-02T03:04:04Z four\n"},
		{"limit bytes", LogOptions{Tail: -1, LimitBytes: 6}, "one\ntw"},
		{"limit beyond the log", LogOptions{Tail: -1, LimitBytes: 1000}, "one\ntwo\nthree\nfour\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ReadLogs(context.Background(), path, tc.opts, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}

func TestTailOffsetLongLinesAndNoFinalNewline(t *testing.T) {
	long := strings.Repeat("x", 10000)
	content := "a\n" + long + "\nb"
	for _, tc := range []struct {
		n    int64
		want int64
	}{
		{1, int64(len("a\n" + long + "\n"))},
		{2, 2},
		{3, 0},
		{0, int64(len(content))},
	} {
		got, err := tailOffset(strings.NewReader(content), tc.n)
		if err != nil || got != tc.want {
			t.Errorf("tail %d: got %d, %v; want %d", tc.n, got, err, tc.want)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReadLogsFollow(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:01Z stdout F first\n")
	out, stop := followLog(t, path)
	waitUntil(t, "the first line", func() bool { return out.String() == "first\n" })
	// A line written in two pieces comes out whole once its end is written.
	appendLog(t, path, "2026-01-02T03:04:02Z stdout F sec")
	appendLog(t, path, "ond\n")
	waitUntil(t, "the second line", func() bool { return out.String() == "first\nsecond\n" })
	// The container stops after writing a last line: the reader sends it, then ends.
	appendLog(t, path, "2026-01-02T03:04:03Z stdout F last\n")
	stop()
	if got := out.String(); got != "first\nsecond\nlast\n" {
		t.Errorf("followed %q", got)
	}
}

func TestReadLogsFollowEndsWithContext(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:01Z stdout F first\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(ctx, path, LogOptions{Tail: -1, Follow: true, PollInterval: 5 * time.Millisecond}, &lockedbuf.Buffer{})
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("following did not end with its context")
	}
}

func TestLogOptionsFromQuery(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		query    string
		want     LogOptions
		previous bool
		wantErr  string
	}{
		{query: "", want: LogOptions{Tail: -1}},
		{query: "follow=true&timestamps=1&tailLines=5&limitBytes=10&previous=true", want: LogOptions{Tail: 5, LimitBytes: 10, Follow: true, Timestamps: true}, previous: true},
		{query: "sinceSeconds=60", want: LogOptions{Tail: -1, Since: now.Add(-time.Minute)}},
		{query: "sinceTime=2026-01-01T00:00:00Z", want: LogOptions{Tail: -1, Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{query: "tailLines=-1", wantErr: "tailLines: Invalid value"},
		{query: "limitBytes=0", wantErr: "limitBytes: Invalid value"},
		{query: "sinceSeconds=0", wantErr: "sinceSeconds: Invalid value"},
		{query: "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", wantErr: "at most one of `sinceTime` or `sinceSeconds`"},
		{query: "sinceTime=yesterday", wantErr: "sinceTime: Invalid value"},
	} {
		r := httptest.NewRequest("GET", "/containerLogs/ns/p/c?"+tc.query, nil)
		got, previous, err := logOptionsFromQuery(r, now)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.query, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
			continue
		}
		if !got.Since.Equal(tc.want.Since) || got.Tail != tc.want.Tail || got.LimitBytes != tc.want.LimitBytes ||
			got.Follow != tc.want.Follow || got.Timestamps != tc.want.Timestamps || previous != tc.previous {
			t.Errorf("%q: got %+v previous %v, want %+v previous %v", tc.query, got, previous, tc.want, tc.previous)
		}
	}
}

// TestReadLogsFollowAcrossRotation follows a log while the kubelet rotates it: what was
// written to the old file comes out before what the runtime writes to the new one.
func TestReadLogsFollowAcrossRotation(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:01Z stdout F first\n")
	out, stop := followLog(t, path)
	waitUntil(t, "the first line", func() bool { return out.String() == "first\n" })
	// The runtime's last write to the old file races with the rename: the reader still
	// sends it, before anything of the new file.
	appendLog(t, path, "2026-01-02T03:04:02Z stdout F second\n")
	if err := os.Rename(path, path+".20260102-030402"); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path, "2026-01-02T03:04:03Z stdout F third\n")
	waitUntil(t, "the line of the new file", func() bool { return out.String() == "first\nsecond\nthird\n" })
	appendLog(t, path, "2026-01-02T03:04:04Z stdout F fourth\n")
	waitUntil(t, "a later line of the new file", func() bool { return out.String() == "first\nsecond\nthird\nfourth\n" })
	stop()
}

// TestReadLogsFollowWaitsForTheOldFilesLastLine follows a log whose runtime writes the
// old file's last line after the new file has begun (containerd drains its old writer in
// a goroutine of its own): the reader still sends that line, and before the new file's.
func TestReadLogsFollowWaitsForTheOldFilesLastLine(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:01Z stdout F first\n")
	out, stop := followLog(t, path)
	waitUntil(t, "the first line", func() bool { return out.String() == "first\n" })
	rotatedPath := path + ".20260102-030402"
	if err := os.Rename(path, rotatedPath); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path, "2026-01-02T03:04:03Z stdout F third\n")
	// Twenty of the follower's polls: a reader that leaves the old file as soon as the
	// new one exists has left it by now.
	time.Sleep(100 * time.Millisecond)
	appendLog(t, rotatedPath, "2026-01-02T03:04:02Z stdout F second\n")
	waitUntil(t, "the line of the new file", func() bool { return strings.Count(out.String(), "\n") == 3 })
	if got := out.String(); got != "first\nsecond\nthird\n" {
		t.Errorf("followed %q, want the old file's late line before the new file's", got)
	}
	stop()
}

// followLog follows the log at path as `kubectl logs -f` does while its container
// runs; stop marks the container stopped and waits for the reader to end.
func followLog(t *testing.T, path string) (out *lockedbuf.Buffer, stop func()) {
	t.Helper()
	var running atomic.Bool
	running.Store(true)
	out = &lockedbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(context.Background(), path, LogOptions{
			Tail: -1, Follow: true, PollInterval: 5 * time.Millisecond,
			Running: func(context.Context) bool { return running.Load() },
		}, out)
	}()
	return out, func() {
		t.Helper()
		running.Store(false)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("following did not end when the container stopped")
		}
	}
}

// appendLog appends s to the log file at path, creating it as the runtime does after
// a rotation.
func appendLog(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LogOptions select what ReadLogs writes, as the query of /containerLogs does.
type LogOptions struct {
	// Since skips entries written before it; zero keeps all.
	Since time.Time
	// Tail starts at the last Tail lines of the file; negative means from the start.
	Tail int64
	// LimitBytes stops after this many bytes; zero means no limit.
	LimitBytes int64
	// Timestamps prefixes each entry with its RFC3339Nano time.
	Timestamps bool
	// Follow keeps reading as the file grows, while Running says the container runs.
	Follow       bool
	Running      func(context.Context) bool
	PollInterval time.Duration // how often a followed file is read again; 100ms when zero
}

// logEntry is one line of a CRI log file: "<RFC3339Nano time> <stream> <P|F> <content>".
// A line the runtime split (tag P) continues in the next entry.
type logEntry struct {
	time    time.Time
	stream  string
	partial bool
	content []byte
}

// errLimitReached ends a read that wrote LimitBytes.
var errLimitReached = errors.New("log limit reached")

// parseCRILogLine parses one line (without its newline) of the CRI log format.
func parseCRILogLine(line []byte) (logEntry, error) {
	var e logEntry
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return e, fmt.Errorf("no timestamp in %q", line)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return e, fmt.Errorf("timestamp %q: %w", ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return e, fmt.Errorf("no stream type in %q", line)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// An empty line written in full has no trailing space in some runtimes.
		tags, content = rest, nil
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(first) {
	case "P":
		e.partial = true
	case "F":
	default:
		return e, fmt.Errorf("unknown log tag %q", tags)
	}
	e.time, e.stream, e.content = t, string(stream), content
	return e, nil
}

// tailOffset returns the offset of the first of the last n lines of r (a final line
// without its newline counts), or 0 when n is negative.
func tailOffset(r io.Reader, n int64) (int64, error) {
	if n < 0 {
		return 0, nil
	}
	// starts is a ring of the offsets of the last n+1 line starts seen.
	starts := make([]int64, n+1)
	var count, offset, lineStart int64
	br := bufio.NewReader(r)
	for {
		piece, err := br.ReadSlice('\n')
		offset += int64(len(piece))
		switch {
		case err == nil:
			starts[count%(n+1)] = lineStart
			count++
			lineStart = offset
		case err == bufio.ErrBufferFull:
			// A line longer than the buffer comes in pieces; its start stays.
		case err == io.EOF:
			if offset > lineStart {
				starts[count%(n+1)] = lineStart
				count++
			}
			switch {
			case n == 0:
				return offset, nil
			case count <= n:
				return 0, nil
			}
			return starts[(count-n)%(n+1)], nil
		default:
			return 0, err
		}
	}
}

// ReadLogs writes the entries of a CRI log file at path to out as the options select,
// following the file while the container runs when asked to.
func ReadLogs(ctx context.Context, path string, opts LogOptions, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { f.Close() }() // f changes when the log is rotated
	start, err := tailOffset(f, opts.Tail)
	if err != nil {
		return err
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	w := &limitedWriter{w: out, left: opts.LimitBytes}
	br := bufio.NewReader(f)
	var pending []byte // a line whose end the runtime has not written yet
	// quietSince is when the reader found the file it reads rotated and read nothing
	// more from it; zero while it is not rotated or still grows.
	var quietSince time.Time
	for {
		chunk, err := br.ReadBytes('\n')
		pending = append(pending, chunk...)
		if len(chunk) > 0 {
			quietSince = time.Time{}
		}
		if err == nil {
			line := bytes.TrimSuffix(pending, []byte{'\n'})
			pending = pending[:0]
			if werr := writeEntry(w, line, opts); werr != nil {
				if errors.Is(werr, errLimitReached) {
					return nil
				}
				return werr
			}
			continue
		}
		if err != io.EOF {
			return err
		}
		if !opts.Follow {
			return nil
		}
		if rotated(f, path) {
			// The kubelet renamed the file being read and the runtime writes a new one
			// at path. The runtime may still write the old file's last lines after it
			// created the new one (its old writer drains in its own goroutine), so the
			// old file is read until it has been quiet for a while; then the rest of
			// it is written and reading goes on from the start of the new one.
			if quietSince.IsZero() {
				quietSince = time.Now()
			}
			if time.Since(quietSince) < rotationQuiet {
				if !sleep(ctx, poll) {
					return nil
				}
				continue
			}
			quietSince = time.Time{}
			if !writeRest(w, br, pending, opts) {
				return nil
			}
			pending = pending[:0]
			next, err := os.Open(path)
			if err != nil {
				return err
			}
			f.Close()
			f = next
			br.Reset(f)
			continue
		}
		if opts.Running != nil && !opts.Running(ctx) {
			// The container is gone: what it wrote before it stopped is all there is.
			writeRest(w, br, pending, opts)
			return nil
		}
		if !sleep(ctx, poll) {
			return nil
		}
	}
}

// rotationQuiet is how long a rotated log must stop growing before a follower leaves
// it for the new file.
const rotationQuiet = time.Second

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// rotated reports whether path now names another file than f, as after a log rotation.
// While path is missing (between the rotation's rename and the runtime's reopen) it has
// not been rotated yet.
func rotated(f *os.File, path string) bool {
	opened, err := f.Stat()
	if err != nil {
		return false
	}
	current, err := os.Stat(path)
	return err == nil && !os.SameFile(opened, current)
}

// writeRest writes what is left to read of a file that will not grow any more, pending
// being the start of its unfinished line; it reports whether the reader may go on (the
// limit was not reached).
func writeRest(w *limitedWriter, br *bufio.Reader, pending []byte, opts LogOptions) bool {
	rest, _ := io.ReadAll(br)
	pending = append(pending, rest...)
	for _, line := range bytes.Split(pending, []byte{'\n'}) {
		if len(line) > 0 {
			if err := writeEntry(w, line, opts); err != nil {
				return false
			}
		}
	}
	return true
}

// writeEntry writes one log line's content if the options keep it; a line that does not
// parse is skipped, as upstream does.
func writeEntry(w *limitedWriter, line []byte, opts LogOptions) error {
	e, err := parseCRILogLine(line)
	if err != nil {
		return nil
	}
	if !opts.Since.IsZero() && e.time.Before(opts.Since) {
		return nil
	}
	var buf []byte
	if opts.Timestamps {
		buf = append(buf, e.time.UTC().Format(time.RFC3339Nano)...)
		buf = append(buf, ' ')
	}
	buf = append(buf, e.content...)
	if !e.partial {
		buf = append(buf, '\n')
	}
	_, err = w.Write(buf)
	return err
}

// limitedWriter writes at most left bytes (all when left is zero) and flushes after each
// write, so that a followed log reaches the client as it is written.
type limitedWriter struct {
	w       io.Writer
	left    int64
	limited bool
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.left > 0 || l.limited {
		l.limited = true
		if l.left == 0 {
			return 0, errLimitReached
		}
		if int64(len(p)) > l.left {
			p = p[:l.left]
		}
		l.left -= int64(len(p))
	}
	n, err := l.w.Write(p)
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
	if err == nil && l.limited && l.left == 0 {
		return n, errLimitReached
	}
	return n, err
}

// logOptionsFromQuery reads the query of /containerLogs, validated as upstream validates
// PodLogOptions.
func logOptionsFromQuery(r *http.Request, now time.Time) (LogOptions, bool, error) {
	q := r.URL.Query()
	opts := LogOptions{Tail: -1, Follow: parseBool(q.Get("follow")), Timestamps: parseBool(q.Get("timestamps"))}
	previous := parseBool(q.Get("previous"))
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return opts, false, apierrors.NewBadRequest(fmt.Sprintf("tailLines: Invalid value: %q: must be greater than or equal to 0", v))
		}
		opts.Tail = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return opts, false, apierrors.NewBadRequest(fmt.Sprintf("limitBytes: Invalid value: %q: must be greater than 0", v))
		}
		opts.LimitBytes = n
	}
	sinceSeconds, sinceTime := q.Get("sinceSeconds"), q.Get("sinceTime")
	if sinceSeconds != "" && sinceTime != "" {
		return opts, false, apierrors.NewBadRequest("sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
	}
	if sinceSeconds != "" {
		n, err := strconv.ParseInt(sinceSeconds, 10, 64)
		if err != nil || n < 1 {
			return opts, false, apierrors.NewBadRequest(fmt.Sprintf("sinceSeconds: Invalid value: %q: must be greater than 0", sinceSeconds))
		}
		opts.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if sinceTime != "" {
		t, err := time.Parse(time.RFC3339, sinceTime)
		if err != nil {
			return opts, false, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: Invalid value: %q: %v", sinceTime, err))
		}
		opts.Since = t
	}
	return opts, previous, nil
}

// serveContainerLogs streams a container's log file.
func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, previous, err := logOptionsFromQuery(r, time.Now())
	if err != nil {
		writeStatus(w, err)
		return
	}
	c, err := s.findContainer(r.Context(), ns, pod, container, previous)
	if err != nil {
		writeStatus(w, err)
		return
	}
	status, err := s.runtime.ContainerStatus(r.Context(), c.Id, false)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	path := status.GetStatus().GetLogPath()
	if path == "" {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q has no log file", container, pod)))
		return
	}
	if _, err := os.Stat(path); err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("log of container %q in pod %q: %v", container, pod, err)))
		return
	}
	opts.Running = func(ctx context.Context) bool {
		st, err := s.runtime.ContainerStatus(ctx, c.Id, false)
		return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if err := ReadLogs(r.Context(), path, opts, w); err != nil {
		s.log.Debug("reading container log", "pod", ns+"/"+pod, "container", container, "err", err)
	}
}

// Package logrotate keeps running containers' log files bounded, as upstream's kubelet
// container log manager does: every monitor interval it looks at the CRI log file of
// each running container and, once one has grown past the size limit, renames it aside
// with a timestamp suffix, asks the runtime to reopen the log, gzips the older rotated
// files and removes the oldest so that at most MaxFiles files remain, the current one
// included.
package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Upstream's defaults for the kubelet's --container-log-* flags.
const (
	DefaultMaxSize         = 10 << 20 // 10Mi
	DefaultMaxFiles        = 5
	DefaultMaxWorkers      = 1
	DefaultMonitorInterval = 10 * time.Second
)

// minMonitorInterval is the shortest interval upstream's kubelet configuration accepts.
const minMonitorInterval = 3 * time.Second

const (
	// timestampFormat is the suffix of a rotated log: <log>.20060102-150405.
	timestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	// tmpSuffix marks a compression in progress; one left behind was interrupted.
	tmpSuffix = ".tmp"
)

// Runtime is the part of the CRI runtime service the rotation uses; a
// k8s.io/cri-api/pkg/apis RuntimeService satisfies it.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Options configure a Manager. Runtime is required; zero values mean upstream's
// defaults.
type Options struct {
	Runtime Runtime
	// MaxSize is the size in bytes past which a log is rotated; negative disables
	// rotation, as upstream's.
	MaxSize int64
	// MaxFiles is how many files a container's log may have, the current one included;
	// at least 2.
	MaxFiles int
	// MaxWorkers is how many containers are rotated at once; at least 1.
	MaxWorkers int
	// MonitorInterval is how often the logs are looked at; at least 3s.
	MonitorInterval time.Duration
	Clock           clock.WithTicker
	Logger          *slog.Logger
}

// Manager rotates the logs of the running containers.
type Manager struct {
	opts Options
	// mu serializes passes: two rotations of one file at once would race on its name.
	mu sync.Mutex
}

// New validates opts and returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Runtime == nil {
		return nil, errors.New("logrotate: Options.Runtime is required")
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.MaxFiles < 2 {
		return nil, fmt.Errorf("logrotate: invalid container log max files %d, must be at least 2", opts.MaxFiles)
	}
	if opts.MaxWorkers == 0 {
		opts.MaxWorkers = DefaultMaxWorkers
	}
	if opts.MaxWorkers < 1 {
		return nil, fmt.Errorf("logrotate: invalid container log max workers %d, must be at least 1", opts.MaxWorkers)
	}
	if opts.MonitorInterval == 0 {
		opts.MonitorInterval = DefaultMonitorInterval
	}
	if opts.MonitorInterval < minMonitorInterval {
		return nil, fmt.Errorf("logrotate: invalid container log monitor interval %v, must be at least %v", opts.MonitorInterval, minMonitorInterval)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts}, nil
}

// ParseMaxSize parses a quantity such as "10Mi", the form of the kubelet's
// --container-log-max-size, into bytes.
func ParseMaxSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("container log max size %q: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("container log max size %q is not a whole number of bytes", s)
	}
	return n, nil
}

// Enabled reports whether the Manager rotates at all (MaxSize is not negative).
func (m *Manager) Enabled() bool { return m.opts.MaxSize >= 0 }

// Run rotates the logs every monitor interval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if !m.Enabled() {
		return
	}
	m.opts.Logger.Info("container log rotation started", "maxSize", m.opts.MaxSize,
		"maxFiles", m.opts.MaxFiles, "workers", m.opts.MaxWorkers, "interval", m.opts.MonitorInterval)
	t := m.opts.Clock.NewTicker(m.opts.MonitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := m.RotateLogs(ctx); err != nil && ctx.Err() == nil {
			m.opts.Logger.Error("rotating container logs", "err", err)
		}
	}
}

// RotateLogs makes one pass over the running containers, rotating each log that has
// grown past MaxSize. A container's failure does not stop the others; the errors are
// returned together.
func (m *Manager) RotateLogs(ctx context.Context) error {
	if !m.Enabled() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	containers, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	var (
		wg      sync.WaitGroup
		errsMu  sync.Mutex
		errs    []error
		workers = make(chan struct{}, m.opts.MaxWorkers)
	)
	for _, c := range containers {
		// Only running containers write; a stopped one's log stays as it ended.
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		id := c.GetId()
		workers <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-workers; wg.Done() }()
			if err := m.rotateContainer(ctx, id); err != nil {
				errsMu.Lock()
				errs = append(errs, fmt.Errorf("container %s: %w", id, err))
				errsMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rotateContainer rotates one container's log if it is over the limit.
func (m *Manager) rotateContainer(ctx context.Context, id string) error {
	resp, err := m.opts.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return fmt.Errorf("container status: %w", err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil // the container logs nowhere
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A rotation interrupted between the rename and the reopen leaves the runtime
		// writing to the renamed file; reopening brings the log back.
		if err := m.opts.Runtime.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("log %s is missing and reopening it failed: %w", path, err)
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return err
	}
	if info.Size() < m.opts.MaxSize {
		return nil
	}
	return m.rotate(ctx, id, path)
}

// rotate makes room among the rotated files, compresses them, and then moves the
// current log aside and has the runtime start a new one.
func (m *Manager) rotate(ctx context.Context, id, path string) error {
	rotated, err := m.prune(path)
	if err != nil {
		return err
	}
	for _, f := range rotated {
		if strings.HasSuffix(f, compressSuffix) {
			continue
		}
		if err := compress(f); err != nil {
			return err
		}
	}
	return m.rotateCurrent(ctx, id, path)
}

// prune removes leftovers of interrupted compressions and the oldest rotated files,
// keeping MaxFiles-2 of them: the current log and the one about to be rotated make up
// the rest. It returns the files kept, oldest first.
func (m *Manager) prune(path string) ([]string, error) {
	all, err := rotatedFiles(path)
	if err != nil {
		return nil, err
	}
	kept, leftovers := splitLeftovers(all)
	for _, f := range leftovers {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing leftover %s: %w", f, err)
		}
	}
	// The timestamp suffix sorts by time. Removing from the oldest keeps a reader of
	// a newer file undisturbed.
	slices.Sort(kept)
	excess := len(kept) - (m.opts.MaxFiles - 2)
	for i := 0; i < excess; i++ {
		if err := os.Remove(kept[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing old log %s: %w", kept[i], err)
		}
	}
	return kept[max(excess, 0):], nil
}

// rotatedFiles returns every file beside path named <path>.<something>.
func rotatedFiles(path string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	prefix := filepath.Base(path) + "."
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			files = append(files, filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
	return files, nil
}

// splitLeftovers separates the rotated files still holding log from the leftovers of
// an interrupted compression: temporary files, and uncompressed files whose compressed
// copy was finished.
func splitLeftovers(files []string) (kept, leftovers []string) {
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, tmpSuffix):
			leftovers = append(leftovers, f)
		case !strings.HasSuffix(f, compressSuffix) && slices.Contains(files, f+compressSuffix):
			leftovers = append(leftovers, f)
		default:
			kept = append(kept, f)
		}
	}
	return kept, leftovers
}

// compress replaces file with file.gz, writing through a temporary file so that an
// interruption never leaves a truncated archive under the final name.
func compress(file string) (err error) {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := file + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err := os.Rename(tmp, file+compressSuffix); err != nil {
		return err
	}
	return os.Remove(file)
}

// rotateCurrent renames the current log to <path>.<timestamp> and asks the runtime to
// write a new one. If the runtime cannot, the file is renamed back so the container
// keeps one log and the next pass tries again.
func (m *Manager) rotateCurrent(ctx context.Context, id, path string) error {
	rotated := path + "." + m.opts.Clock.Now().Format(timestampFormat)
	// Two rotations within one second would share a name, and renaming onto the first
	// (or beside its archive) would lose it; the next pass rotates instead.
	for _, taken := range []string{rotated, rotated + compressSuffix} {
		if _, err := os.Lstat(taken); err == nil {
			return fmt.Errorf("%s already exists; rotating on a later pass", taken)
		}
	}
	if err := os.Rename(path, rotated); err != nil {
		return err
	}
	if err := m.opts.Runtime.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(rotated, path); rerr != nil {
			m.opts.Logger.Error("restoring a log after a failed reopen", "container", id,
				"from", rotated, "to", path, "err", rerr)
		}
		return fmt.Errorf("reopening the log: %w", err)
	}
	m.opts.Logger.Debug("rotated container log", "container", id, "log", path, "rotated", rotated)
	return nil
}

package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Run writes containerd's configuration and runs containerd until ctx ends, restarting it
// (after a pause that doubles up to a minute) whenever it exits on its own.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	opts.setDefaults()
	if opts.DataDir == "" {
		return errors.New("containerd: DataDir is required")
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(opts.DataDir, 0o711); err != nil {
		return err
	}
	if opts.StreamServerPort == 0 {
		port, err := freeLocalPort()
		if err != nil {
			return err
		}
		opts.StreamServerPort = port
	}
	if opts.ConfigVersion == 0 {
		opts.ConfigVersion = configVersionOf(ctx, opts.ContainerdPath)
	}
	if err := WriteHostsDir(opts.HostsDir(), opts.Registries); err != nil {
		return fmt.Errorf("writing the registries' hosts.toml files: %w", err)
	}
	if err := os.WriteFile(opts.configPath(), []byte(opts.Config()), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.CNIConfDir(), 0o755); err != nil {
		return err
	}
	delay := time.Second
	for {
		started := time.Now()
		err := runOnce(ctx, opts)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			delay = time.Second
		}
		log.Error("containerd exited; restarting", "err", err, "after", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
}

// runOnce runs containerd until it exits or ctx ends; on ctx's end it is asked to stop
// with SIGTERM and killed if it lingers.
func runOnce(ctx context.Context, opts Options) error {
	cmd := exec.Command(opts.ContainerdPath, "--config", opts.configPath())
	if strings.Contains(opts.ContainerdPath, "/") {
		// containerd finds its shim (containerd-shim-runc-v2) in PATH first: a containerd
		// the user names gets the shim beside it, not another version's from PATH.
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(opts.ContainerdPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	logFile, err := os.OpenFile(opts.DataDir+"/containerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// containerd dies with its supervisor, even a killed one, so that a restarted agent
	// does not find the old containerd holding its state; the containers live on in
	// their shims and the new containerd reconnects to them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			return <-exited
		}
	}
}

// WaitReady waits until containerd accepts connections on its socket.
func WaitReady(ctx context.Context, opts Options) error {
	for {
		conn, err := net.DialTimeout("unix", opts.Socket(), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd not ready: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Start runs containerd in the background (as Run does), waits until it answers, and
// imports the sandbox image built around pauseBinary, a statically linked build of
// ./pause. It returns once the runtime is usable; the channel yields Run's result after
// ctx ends.
func Start(ctx context.Context, opts Options, log *slog.Logger, pauseBinary []byte) (<-chan error, error) {
	opts.setDefaults()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts, log) }()
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := WaitReady(readyCtx, opts); err != nil {
		return done, err
	}
	if err := ImportImage(readyCtx, opts, PauseImage(opts.SandboxImage, pauseBinary)); err != nil {
		return done, err
	}
	return done, nil
}

// configVersionOf is the configuration format the containerd binary reads: 3 from
// containerd 2.0 on, 2 before (and when its version cannot be read). `containerd
// --version` prints "containerd MODULE VERSION COMMIT".
func configVersionOf(ctx context.Context, containerdPath string) int {
	out, err := exec.CommandContext(ctx, containerdPath, "--version").Output()
	if err != nil {
		return 2
	}
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return 2
	}
	if major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(fields[2], "v"), ".", 2)[0]); err == nil && major >= 2 {
		return 3
	}
	return 2
}

// freeLocalPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

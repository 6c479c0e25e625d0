package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/scheduler"
)

// cluster is a control plane with a scheduler, and the CPU time its processes used.
type cluster interface {
	benchutil.Cluster
	CPU() time.Duration
	// StopScheduler stops the scheduler; StartScheduler starts a new one (-queued).
	StopScheduler()
}

// processes is a cluster of separate processes; CPU sums theirs.
type processes struct{ benchutil.Cluster }

// StopScheduler stops the scheduler process of a benchutil.Mizzen or Upstream.
func (p processes) StopScheduler() {
	if s, ok := p.Cluster.(interface{ StopScheduler() }); ok {
		s.StopScheduler()
	}
}

func (p processes) CPU() time.Duration {
	return time.Duration(benchutil.CPU(p.PIDs()) * float64(time.Second))
}

// inProcess runs etcd, the apiserver and the scheduler in this process (so that
// -cpuprofile sees them); CPU is this process's, the benchmark's clients included.
type inProcess struct {
	dir    string
	cp     *core.ControlPlane
	stop   context.CancelFunc
	ctx    context.Context
	logger *slog.Logger
	sched  chan error
	// stopSched ends the running scheduler (its context is a child of ctx).
	stopSched context.CancelFunc
}

func startInProcess(verbose bool) (cluster, error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-sched-")
	if err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := context.WithCancel(context.Background())
	cp, err := core.Start(ctx, core.Options{DataDir: dir, BindAddress: "127.0.0.1", SecurePort: 0, Log: logger})
	if err != nil {
		stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return &inProcess{dir: dir, cp: cp, stop: stop, ctx: ctx, logger: logger}, nil
}

func (c *inProcess) Name() string              { return "mizzen in-process" }
func (c *inProcess) AdminConfig() *rest.Config { return rest.CopyConfig(c.cp.AdminConfig) }
func (c *inProcess) ServerPIDs() []int         { return []int{os.Getpid()} }
func (c *inProcess) PIDs() []int               { return []int{os.Getpid()} }
func (c *inProcess) CPU() time.Duration        { return processCPU() }

func (c *inProcess) StartScheduler(qps float64) error {
	configFile := filepath.Join(c.dir, "scheduler.yaml")
	if err := os.WriteFile(configFile, []byte(benchutil.SchedulerConfig("", qps)), 0o600); err != nil {
		return err
	}
	schedLogger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if c.logger.Enabled(context.Background(), slog.LevelInfo) {
		schedLogger = c.logger
	}
	c.sched = make(chan error, 1)
	ctx, stop := context.WithCancel(c.ctx)
	c.stopSched = stop
	go func() {
		c.sched <- scheduler.Run(ctx, scheduler.Options{RestConfig: c.cp.AdminConfig, ConfigFile: configFile, MetricsAddr: "0", Logger: schedLogger})
	}()
	return nil
}

func (c *inProcess) StopScheduler() {
	if c.sched != nil {
		c.stopSched()
		<-c.sched
		c.sched = nil
	}
}

func (c *inProcess) Stop() {
	c.stop()
	c.StopScheduler()
	<-c.cp.Done
	os.RemoveAll(c.dir)
}

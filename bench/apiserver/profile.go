package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/controlplane/core"
)

// inProcess is mizzen's etcd and apiserver in this process, so that a CPU profile
// of the creates covers the server (and, mixed in, the benchmark's own clients).
type inProcess struct {
	dir  string
	cp   *core.ControlPlane
	stop context.CancelFunc
}

func startInProcess() (*inProcess, error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	cp, err := core.Start(ctx, core.Options{DataDir: dir, BindAddress: "127.0.0.1", SecurePort: 0, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return &inProcess{dir: dir, cp: cp, stop: stop}, nil
}

func (c *inProcess) Name() string              { return "mizzen in-process" }
func (c *inProcess) AdminConfig() *rest.Config { return rest.CopyConfig(c.cp.AdminConfig) }
func (c *inProcess) ServerPIDs() []int         { return []int{os.Getpid()} }
func (c *inProcess) PIDs() []int               { return []int{os.Getpid()} }
func (c *inProcess) StartScheduler(float64) error {
	panic("bench/apiserver runs no scheduler")
}
func (c *inProcess) Stop() {
	c.stop()
	<-c.cp.Done
	os.RemoveAll(c.dir)
}

// profileInProcess runs the workload against an in-process server, with a CPU
// profile of the creates written to cpuPath, one of the gets written to getPath, one
// of the lists whose body is discarded written to listPath, one of the pod status
// writes written to statusPath, and a
// heap profile, taken where the RSS holding every pod is measured, written to
// heapPath, and the allocations profile as the creates start and end written to
// allocPath+".before" and allocPath, and an execution trace of the creates' first
// 2 seconds written to tracePath (any may be empty).
func profileInProcess(cpuPath, getPath, listPath, statusPath, heapPath, allocPath, tracePath string, o options) error {
	c, err := startInProcess()
	if err != nil {
		return err
	}
	defer c.Stop()
	var err2 error
	if o.profile, err2 = cpuProfiler(cpuPath); err2 != nil {
		return err2
	}
	if o.profileGets, err2 = cpuProfiler(getPath); err2 != nil {
		return err2
	}
	if o.profileLists, err2 = cpuProfiler(listPath); err2 != nil {
		return err2
	}
	if o.profileStatus, err2 = cpuProfiler(statusPath); err2 != nil {
		return err2
	}
	if allocPath != "" {
		cpu := o.profile
		o.profile = func(start bool) {
			path := allocPath
			if start {
				path += ".before"
			} else if cpu != nil {
				cpu(false) // the CPU profile ends before the allocations profile is written
				cpu = nil
			}
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if start && cpu != nil {
				cpu(true)
			}
		}
	}
	if tracePath != "" {
		prev := o.profile
		o.profile = func(start bool) {
			if prev != nil {
				prev(start)
			}
			if start {
				// It ends by itself; the gets and lists after the creates outlast it.
				_, _ = benchutil.TraceWindow(tracePath, 0, 2*time.Second)
			}
		}
	}
	var heapErr error
	if heapPath != "" {
		o.holding = func() {
			f, err := os.Create(heapPath)
			if err != nil {
				heapErr = err
				return
			}
			defer f.Close()
			printMemStats("where RSS holding the pods is measured")
			runtime.GC()
			printMemStats("after a forced GC")
			heapErr = pprof.Lookup("heap").WriteTo(f, 0)
		}
	}
	o.watchers = 0
	res, err := run(c, time.Now(), o)
	if err == nil {
		os.Stdout.WriteString(res.String())
	}
	if err == nil {
		err = heapErr
	}
	return err
}

// cpuProfiler returns a function starting (true) and stopping (false) a CPU profile
// written to path, or nil when path is empty.
func cpuProfiler(path string) (func(start bool), error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return func(start bool) {
		if start {
			_ = pprof.StartCPUProfile(f)
		} else {
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}

// printMemStats prints where the Go runtime's memory is, so that the RSS figure can be
// split into live heap, the heap's headroom, freed spans not yet returned, and stacks.
func printMemStats(when string) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Printf("memstats %s: HeapAlloc %.1f MiB, HeapInuse %.1f, HeapIdle %.1f (released %.1f), NextGC %.1f, StackInuse %.1f, Sys %.1f, NumGC %d\n",
		when, mib(m.HeapAlloc), mib(m.HeapInuse), mib(m.HeapIdle), mib(m.HeapReleased), mib(m.NextGC), mib(m.StackInuse), mib(m.Sys), m.NumGC)
	if data, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "Rss:") || strings.HasPrefix(line, "Anonymous:") || strings.HasPrefix(line, "FilePmdMapped:") || strings.HasPrefix(line, "AnonHugePages:") {
				fmt.Println("  ", line)
			}
		}
	}
}

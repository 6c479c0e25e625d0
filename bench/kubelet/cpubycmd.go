package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuGroup is the cpuacct cgroup every process the benchmark starts is counted in.
const cpuGroup = "mizzen-bench-kubelet"

// cpuByCommand is the CPU time of each command in the benchmark's cgroup now, by
// name, counting what each has reaped of its children: containerd's includes the CNI
// plugins it ran, a shim's the runc it ran. Processes that ended unreaped are missing.
func cpuByCommand() map[string]time.Duration {
	out := map[string]time.Duration{}
	pids, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", cpuGroup, "cgroup.procs"))
	if err != nil {
		return out
	}
	for _, pid := range strings.Fields(string(pids)) {
		stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..." with utime, stime, cutime, cstime the 14th-17th
		// fields; comm may hold spaces, so the fields after it are counted from ")".
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 15 {
			continue
		}
		var ticks int64
		for _, f := range fields[11:15] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
		out[s[open+1:end]] += time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
	}
	return out
}

// cpuBreakdown says, per pod, where total (the whole cgroup's CPU between before and
// after) went by command, largest first; "other" is what no live process accounts
// for (processes that ended unreaped, such as the benchmark's own exited children).
func cpuBreakdown(before, after map[string]time.Duration, total time.Duration, pods int) string {
	type share struct {
		name string
		d    time.Duration
	}
	var shares []share
	var counted time.Duration
	for name, d := range after {
		if d -= before[name]; d > 0 {
			shares = append(shares, share{name, d})
			counted += d
		}
	}
	slices.SortFunc(shares, func(a, b share) int { return int(b.d - a.d) })
	var parts []string
	for _, s := range shares {
		if s.d*100 >= total { // 1% or more
			parts = append(parts, fmt.Sprintf("%s %.0f", s.name, float64(s.d.Milliseconds())/float64(pods)))
		}
	}
	parts = append(parts, fmt.Sprintf("other %.0f", float64((total-counted).Milliseconds())/float64(pods)))
	return "ms per pod by command: " + strings.Join(parts, ", ")
}

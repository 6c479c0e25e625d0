package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
)

// runtimeFloor starts pods straight through CRI on a containerd of its own, the way the
// kubelet calls it (RunPodSandbox, CreateContainer, StartContainer, a few at a time,
// each pod in its own QoS cgroup, a log file per container) but with no apiserver,
// scheduler, kubelet, volume or status write in between: what the runtime alone needs,
// the floor under the kubelet's figures on this machine.
//
// With hostNetwork the sandboxes share the host's network namespace, as hostNetwork
// pods do: no network namespace, veth or CNI plugin at all, which bounds what any pod
// network could save.
//
// It returns the figures of the first slot count, and the median of singles pods started
// one at a time, in the kubelet's result's fields.
func runtimeFloor(bin, dir string, singles, n int, slotCounts []int, hostNetwork bool, cpu func() time.Duration) (floor result, err error) {
	ctx, stop := context.WithCancel(context.Background())
	const bridge = "mzn-floor"
	opts := containerd.Options{DataDir: filepath.Join(dir, "floor-containerd"), Bridge: bridge}
	pause, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "mizzen-pause"))
	if err != nil {
		stop()
		return floor, err
	}
	var mu sync.Mutex
	var pods createdPods
	stopped, err := containerd.Start(ctx, opts, nil, pause)
	defer func() {
		_ = containerd.RemoveAllPods(context.Background(), opts)
		stop()
		<-stopped
		_ = exec.Command("ip", "link", "delete", bridge).Run()
		_ = containerd.RemoveMasquerade(bridge)
		pods.removeCgroups()
	}()
	if err != nil {
		return floor, err
	}
	if err := opts.WriteCNIConfig("10.202.0.0/16"); err != nil {
		return floor, err
	}
	rs, _, err := kubelet.ConnectRuntime(ctx, opts.Endpoint(), "")
	if err != nil {
		return floor, err
	}
	defer rs.Close(ctx)
	startPod := func(name string) error {
		uid := string(uuid.NewUUID())
		pods.add(types.UID(uid))
		logDir := filepath.Join(dir, "floor-logs", uid)
		sbCfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
			Hostname:     name,
			LogDirectory: logDir,
			Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/besteffort/pod" + uid},
		}
		if hostNetwork { // and so the host's UTS namespace and hostname too
			sbCfg.Hostname = ""
			sbCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			}
		}
		sb, err := rs.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			return err
		}
		id, err := rs.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image:    &runtimeapi.ImageSpec{Image: containerd.DefaultSandboxImage},
			LogPath:  "c/0.log",
		}, sbCfg)
		if err != nil {
			return err
		}
		return rs.StartContainer(ctx, id)
	}

	// Pods one at a time on an idle runtime, then for each number of slots a burst of n
	// and 100 pods 10 at a time.
	var single []time.Duration
	for i := range singles {
		begin := time.Now()
		if err := startPod(fmt.Sprintf("floor-single-%d", i)); err != nil {
			return floor, err
		}
		single = append(single, time.Since(begin))
		if err := containerd.RemoveAllPods(ctx, opts); err != nil {
			return floor, err
		}
	}
	floor.single = benchutil.Percentile(single, 0.5)
	network := "pod network"
	if hostNetwork {
		network = "host network"
	}
	fmt.Printf("runtime alone (CRI straight to containerd), %s: one pod, median %v of %s (load average %s)\n",
		network, floor.single.Round(time.Millisecond), roundedList(single), loadavg())
	// startBatch starts count pods, slots at a time, and returns how long after the
	// batch began each was started.
	startBatch := func(prefix string, count, slots int) ([]time.Duration, error) {
		gate := make(chan struct{}, slots)
		var done []time.Duration
		var firstErr error
		var wg sync.WaitGroup
		begin := time.Now()
		for i := range count {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gate <- struct{}{}
				err := startPod(fmt.Sprintf("%s-%03d", prefix, i))
				<-gate
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done = append(done, time.Since(begin))
			}()
		}
		wg.Wait()
		return done, firstErr
	}
	for i, slots := range slotCounts {
		if err := containerd.RemoveAllPods(ctx, opts); err != nil {
			return floor, err
		}
		cpu0, byCmd0 := cpu(), cpuByCommand()
		burst, err := startBatch(fmt.Sprintf("burst-%d", slots), n, slots)
		if err != nil {
			return floor, err
		}
		cpuBurst := cpu() - cpu0
		byCmd := cpuBreakdown(byCmd0, cpuByCommand(), cpuBurst, n)
		if err := containerd.RemoveAllPods(ctx, opts); err != nil {
			return floor, err
		}
		// The kubelet figure's other shape: 100 pods, 10 at a time, each batch after
		// the one before has started.
		var steady []time.Duration
		for b := range 10 {
			batch, err := startBatch(fmt.Sprintf("steady-%d-%d", slots, b), 10, slots)
			if err != nil {
				return floor, err
			}
			steady = append(steady, batch...)
		}
		fmt.Printf("runtime alone, %s, %d at a time: burst of %d p50 %v, p99 %v, %.0f ms CPU per pod; 100 pods 10 at a time p50 %v, p99 %v (load average %s)\n",
			network, slots, n, benchutil.Percentile(burst, 0.5).Round(time.Millisecond),
			benchutil.Percentile(burst, 0.99).Round(time.Millisecond), float64(cpuBurst.Milliseconds())/float64(n),
			benchutil.Percentile(steady, 0.5).Round(time.Millisecond), benchutil.Percentile(steady, 0.99).Round(time.Millisecond), loadavg())
		fmt.Printf("  the burst's %s\n", byCmd)
		if i == 0 {
			floor.burst50, floor.burst99 = benchutil.Percentile(burst, 0.5), benchutil.Percentile(burst, 0.99)
			floor.steady50, floor.steady99 = benchutil.Percentile(steady, 0.5), benchutil.Percentile(steady, 0.99)
		}
	}
	return floor, nil
}

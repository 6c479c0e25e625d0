package kubelet

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/kubelet/eviction"
	"mizzen/internal/kubelet/volume"
	"mizzen/internal/podrestart"
)

// Waiting reasons the kubelet reports, as upstream spells them.
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
	reasonCrashLoopBackOff  = "CrashLoopBackOff"
	reasonErrImagePull      = "ErrImagePull"
	reasonImagePullBackOff  = "ImagePullBackOff"
	reasonErrImageNeverPull = "ErrImageNeverPull"
	reasonConfigError       = "CreateContainerConfigError"
	reasonCreateError       = "CreateContainerError"
	reasonRunError          = "RunContainerError"
)

// configErrorRetry is how soon a container that could not be configured
// (CreateContainerConfigError) is tried again: upstream's pod worker back-off period.
const configErrorRetry = 10 * time.Second

// syncPod brings one pod one step closer to its spec and writes its status. It reports
// done when the pod is gone from the API and its runtime objects are removed.
func (kl *Kubelet) syncPod(ctx context.Context, w *podWorker) (bool, error) {
	uid := string(w.uid)
	if strings.HasPrefix(uid, "mirror:") {
		return kl.syncOrphanMirror(ctx, w)
	}
	rt, err := kl.readPodRuntime(ctx, uid)
	if err != nil {
		return false, err
	}
	pod := kl.statusWrites.current(kl.getPod(w.key, uid))
	switch {
	case pod == nil:
		done, err := kl.cleanupPod(ctx, w, rt)
		if done && len(rt.sandboxes) > 0 && kl.static != nil {
			// A static pod of the same name may be waiting for this one (found
			// running after a restart) to be gone.
			labels := rt.sandboxes[0].GetLabels()
			kl.wakeStaticPodNamed(labels[labelPodNamespace]+"/"+labels[labelPodName], w.uid)
		}
		return done, err
	case pod.DeletionTimestamp != nil:
		if err := kl.terminatePod(ctx, w, pod, rt); err != nil {
			return false, err
		}
		kl.staticPodTerminated(w.uid)
		return false, nil
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		// A terminal pod never runs again: stop what is left, keep the status, and
		// release its volumes (tmpfs memory, tokens) as upstream does.
		w.state.stopProbes()
		if err := kl.stopAll(ctx, rt, 0); err != nil {
			return false, err
		}
		return false, kl.volumes.TearDownVolumes(ctx, w.uid)
	}
	// From here the sync runs the pod; its deletion cancels ctx (see podWorkers).
	kl.workers.runsLive(w)

	if kl.static.get(w.uid) != nil {
		wait, err := kl.waitsForOlderPod(ctx, pod)
		if err != nil {
			return false, err
		}
		if wait {
			// Poked again when the older pod has terminated (or by the resync).
			kl.log.Info("static pod waits for the older pod of its name to terminate", "pod", w.key, "uid", w.uid)
			return false, nil
		}
		if err := kl.syncMirrorPod(ctx, pod); err != nil {
			kl.log.Error("syncing mirror pod", "pod", w.key, "err", err)
		}
	}
	if ev := w.state.pendingEviction(); ev.message != "" {
		// The eviction's grace period, whatever the pod's own.
		var disruption []v1.PodCondition
		if ev.nodePressure {
			disruption = append(disruption, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
				Reason: v1.PodReasonTerminationByKubelet, Message: ev.message})
		}
		return false, kl.failPod(ctx, w, pod, rt, ev.gracePeriod, eviction.Reason, ev.message, disruption...)
	}
	if reason, msg := kl.admitUnderPressure(pod); reason != "" {
		return false, kl.failPod(ctx, w, pod, rt, gracePeriod(pod), reason, msg)
	}
	if reason, msg := kl.admit(pod); reason != "" {
		return false, kl.failPod(ctx, w, pod, rt, gracePeriod(pod), reason, msg)
	}
	if left, ok := kl.deadlineLeft(pod); ok {
		if left <= 0 {
			return false, kl.failPod(ctx, w, pod, rt, gracePeriod(pod), "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
		}
		kl.workers.pokeAfter(w.uid, left)
	}

	// The pod's start is this first sync of it, before its volumes (a token request, a
	// wait for a missing ConfigMap), as upstream's status manager stamps status.startTime
	// when SyncPod first sets the pod's status.
	if w.state.startTime.IsZero() {
		w.state.startTime = kl.clock.Now()
	}
	var syncErr error
	vols, volsReady := kl.setUpVolumes(ctx, w, pod)
	if at, ok := kl.volumes.NextRefresh(w.uid); ok {
		// A token or certificate is rewritten when it is due, not up to a resync later.
		kl.workers.pokeAfter(w.uid, at.Sub(kl.clock.Now()))
	}
	if volsReady || rt.anyRunning() {
		// A running pod keeps running while a source is missing, as upstream's does.
		syncErr = kl.reconcilePod(ctx, w, pod, rt, vols)
	}
	if ctx.Err() != nil {
		return false, ctx.Err() // the pod is being deleted: no status for a start given up
	}
	if rt, err = kl.readPodRuntime(ctx, uid); err != nil {
		return false, err
	}
	status := kl.generateStatus(pod, rt, w.state, false)
	if err := kl.writeStatus(ctx, pod, status); err != nil {
		return false, err
	}
	if status.Phase == v1.PodSucceeded || status.Phase == v1.PodFailed {
		w.state.stopProbes()
		return false, kl.stopAll(ctx, rt, 0)
	}
	kl.syncProbes(w, pod, rt)
	return false, syncErr
}

// deadlineLeft is the time left before spec.activeDeadlineSeconds, counted from the
// pod's start time; ok is false when the pod has no deadline or has not started.
func (kl *Kubelet) deadlineLeft(pod *v1.Pod) (time.Duration, bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Status.StartTime == nil {
		return 0, false
	}
	end := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	return end.Sub(kl.clock.Now()), true
}

// failPod ends a pod for good: its containers are stopped with grace seconds each and
// its phase becomes Failed with the reason and message given, and the extra
// conditions.
func (kl *Kubelet) failPod(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime, grace int64, reason, msg string, extra ...v1.PodCondition) error {
	w.state.stopProbes()
	if err := kl.stopAll(ctx, rt, grace); err != nil {
		return err
	}
	rt, err := kl.readPodRuntime(ctx, string(pod.UID))
	if err != nil {
		return err
	}
	status := kl.generateStatus(pod, rt, w.state, true)
	status.Phase, status.Reason, status.Message = v1.PodFailed, reason, msg
	status.Conditions = kl.podConditions(pod, w.state, status, false, len(pod.Spec.InitContainers) == 0, nil)
	for _, c := range extra {
		status.Conditions = setPodCondition(status.Conditions, c, kl.clock.Now())
	}
	kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, reason, "%s", msg)
	return kl.writeStatus(ctx, pod, status)
}

// setPodCondition puts c in conds, replacing one of its type; the transition time
// stays when the status does not change.
func setPodCondition(conds []v1.PodCondition, c v1.PodCondition, now time.Time) []v1.PodCondition {
	c.LastTransitionTime = metav1.NewTime(now)
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		conds[i] = c
		return conds
	}
	return append(conds, c)
}

// cleanupPod removes the runtime objects of a pod no longer in the API.
func (kl *Kubelet) cleanupPod(ctx context.Context, w *podWorker, rt *podRuntime) (bool, error) {
	w.state.stopProbes()
	if err := kl.stopAll(ctx, rt, 0); err != nil {
		return false, err
	}
	for _, c := range rt.containers {
		if err := kl.runtime.RemoveContainer(ctx, c.Id); err != nil && !isRuntimeNotFound(err) {
			return false, err
		}
	}
	for _, sb := range rt.sandboxes {
		if err := kl.runtime.RemovePodSandbox(ctx, sb.Id); err != nil && !isRuntimeNotFound(err) {
			return false, err
		}
	}
	kl.backoff.forget(string(w.uid) + "/")
	kl.statuses.forget(string(w.uid))
	// The pod's container logs go with it, as upstream's kubelet removes the log
	// directories of pods that no longer exist.
	if ns, name, ok := strings.Cut(w.key, "/"); ok {
		dir := kl.podLogDirOf(ns, name, w.uid)
		if err := os.RemoveAll(dir); err != nil {
			kl.log.Error("removing the pod's logs", "dir", dir, "err", err)
		}
	}
	if err := kl.removePodCgroupAndDir(ctx, w.uid); err != nil {
		return false, fmt.Errorf("removing volumes: %w", err)
	}
	return true, nil
}

// stopAll stops every running container (grace seconds each, in parallel) and every
// ready sandbox, and removes every container created but never started: containerd
// stops only running ones, so such a container (left by a kubelet killed between
// creating and starting it) would otherwise stay "created" for good and the pod could
// never finish terminating.
func (kl *Kubelet) stopAll(ctx context.Context, rt *podRuntime, grace int64) error {
	var wg sync.WaitGroup
	errs := make([]error, len(rt.containers))
	for i, c := range rt.containers {
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			if err := kl.runtime.RemoveContainer(ctx, c.Id); err != nil && !isRuntimeNotFound(err) {
				errs[i] = err
			}
			continue
		default:
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kl.runtime.StopContainer(ctx, c.Id, grace); err != nil && !isRuntimeNotFound(err) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, sb := range rt.sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := kl.runtime.StopPodSandbox(ctx, sb.Id); err != nil && !isRuntimeNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// isRuntimeNotFound reports whether the runtime answered that the sandbox or container
// is not there: what a stop or remove wanted is already done (it was removed since the
// pod's runtime state was read), as upstream's kubelet takes it.
func isRuntimeNotFound(err error) bool { return grpcstatus.Code(err) == codes.NotFound }

// gracePeriod is the pod's termination grace period in seconds.
func gracePeriod(pod *v1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return defaultGracePeriodSec
}

// terminatePod carries out a graceful deletion: preStop hooks, StopContainer with the
// grace period, sandbox stop, a final status, then the pod object's removal with grace
// period 0 and a UID precondition.
//
// Liveness and startup probes stop as the termination begins, so that a container
// failing them while it shuts down is not restarted; readiness probes run on until the
// containers have stopped, and what they change is reported meanwhile (a container
// that stops serving is seen not ready before it exits), as upstream's kubelet does.
func (kl *Kubelet) terminatePod(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) error {
	w.state.stopProbesOf(liveness, startup)
	grace := gracePeriod(pod)
	reported := false // a readiness change was written while the containers stopped
	if rt.anyRunning() {
		deadline := kl.clock.Now().Add(time.Duration(grace) * time.Second)
		podIP := kl.firstPodIP(pod, rt.readySandbox())
		// Regular containers first, then the sidecars they may rely on (upstream stops
		// restartable init containers only after the main containers have stopped).
		for _, sidecars := range []bool{false, true} {
			var wg sync.WaitGroup
			for _, c := range rt.containers {
				if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					continue
				}
				spec := containerSpec(pod, c.GetMetadata().GetName())
				if isSidecar(pod, spec) != sidecars {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					kl.stopWithHook(ctx, w, pod, c.Id, podIP, spec, deadline)
				}()
			}
			if kl.waitReportingReadiness(ctx, w, &wg) {
				reported = true
			}
		}
	}
	w.state.stopProbes()
	if err := kl.stopAll(ctx, rt, 0); err != nil {
		return err
	}
	rt, err := kl.readPodRuntime(ctx, string(pod.UID))
	if err != nil {
		return err
	}
	if rt.anyRunning() {
		return fmt.Errorf("containers of %s still running after stop", w.key)
	}
	if w.deleted {
		return nil
	}
	if cur := kl.statusWrites.current(kl.getPod(w.key, string(w.uid))); reported && cur != nil {
		pod = cur // the status written meanwhile, at its resourceVersion
	}
	if err := kl.writeStatus(ctx, pod, kl.generateStatus(pod, rt, w.state, true)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = kl.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod: %w", err)
	}
	w.deleted = true
	return nil
}

// waitReportingReadiness waits for the containers' stops in wg, writing the pod's
// status whenever a readiness probe changes a container's readiness meanwhile; it
// reports whether it wrote one.
func (kl *Kubelet) waitReportingReadiness(ctx context.Context, w *podWorker, wg *sync.WaitGroup) (wrote bool) {
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	for {
		select {
		case <-stopped:
			return wrote
		case <-w.state.readinessChanged:
		}
		pod := kl.statusWrites.current(kl.getPod(w.key, string(w.uid)))
		if pod == nil {
			continue
		}
		rt, err := kl.readPodRuntime(ctx, string(w.uid))
		if err == nil {
			err = kl.writeStatus(ctx, pod, kl.generateStatus(pod, rt, w.state, false))
			wrote = true
		}
		if err != nil {
			kl.log.Error("writing the status of a terminating pod", "pod", w.key, "err", err)
		}
	}
}

// stopWithHook runs a container's preStop hook, if any, then stops it with what is left
// of the grace period.
func (kl *Kubelet) stopWithHook(ctx context.Context, w *podWorker, pod *v1.Pod, id, podIP string, spec *v1.Container, deadline time.Time) {
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		if msg := kl.runHook(ctx, pod, id, podIP, spec, spec.Lifecycle.PreStop, max(deadline.Sub(kl.clock.Now()), time.Second)); msg != "" {
			kl.log.Info("preStop hook failed", "pod", w.key, "container", spec.Name, "err", msg)
			kl.recorder.Eventf(containerRef(pod, spec.Name), v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
		}
	}
	if spec != nil {
		kl.recorder.Eventf(containerRef(pod, spec.Name), v1.EventTypeNormal, "Killing", "Stopping container %s", spec.Name)
	}
	left := int64(max(deadline.Sub(kl.clock.Now()).Seconds(), 0))
	if err := kl.runtime.StopContainer(ctx, id, left); err != nil {
		kl.log.Error("stopping container", "pod", w.key, "container", id, "err", err)
	}
	// Its readiness probe, still running while the pod's other containers stop, would
	// only fail against a stopped container.
	w.state.stopContainerProbes(id)
}

// isSidecar reports whether a container is a restartable init container (restartPolicy
// Always): started in order with the init containers, kept running beside the main ones.
func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c == nil || c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// containerSpec is the spec of a pod's container by name: main, init or ephemeral.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
	}
	return nil
}

// shouldRestart reports whether exited container c of pod's spec is started again:
// its restart rules, its own restart policy, else the pod's (podrestart, as the
// apiserver decides it).
func shouldRestart(pod *v1.Pod, c *v1.Container, exited *runtimeapi.ContainerStatus) bool {
	return podrestart.ContainerRestarts(c, pod.Spec.RestartPolicy, exited.ExitCode)
}

// restartsAfterSandboxLoss reports whether container c, whose latest instance cur (nil
// if none) did not exit on its own but went with its sandbox, is started again: as a
// failure for its restart policy.
func restartsAfterSandboxLoss(pod *v1.Pod, c *v1.Container, cur *runtimeapi.ContainerStatus) bool {
	if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return shouldRestart(pod, c, cur)
	}
	return podrestart.ContainerRestarts(c, pod.Spec.RestartPolicy, sandboxLossExitCode)
}

// sandboxLossExitCode stands for the exit of a container that went with its sandbox:
// a failure (SIGKILL's), as for restart rules and policies.
const sandboxLossExitCode = 137

// needsNewSandbox reports whether a pod without a ready sandbox should get one: for a
// new pod, and once containers have run, when one of them is to be started again (with
// the pod's restart policy alone: always for Always, never for Never, for OnFailure
// unless every container succeeded).
func needsNewSandbox(pod *v1.Pod, rt *podRuntime) bool {
	if len(rt.sandboxes) == 0 || len(rt.containers) == 0 {
		return true
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if restartsAfterSandboxLoss(pod, c, rt.latest(c.Name)) {
			return true
		}
	}
	return false
}

// reconcilePod does what the pod needs next: a sandbox, the next init container, the
// containers that are missing or due a restart, the kill a failed probe asked for.
func (kl *Kubelet) reconcilePod(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime, vols map[string]volume.Mounted) error {
	sb := rt.readySandbox()
	if sb == nil {
		if !needsNewSandbox(pod, rt) {
			return nil
		}
		if err := kl.stopAll(ctx, rt, 0); err != nil {
			return err
		}
		var attempt uint32
		if len(rt.sandboxes) > 0 {
			attempt = rt.sandboxes[0].Metadata.GetAttempt() + 1
		}
		cfg, err := kl.sandboxConfig(pod, attempt)
		if err != nil {
			return err
		}
		handler, err := kl.runtimeHandler(ctx, pod)
		if err == nil {
			err = kl.checkHostUsers(ctx, pod, handler)
		}
		if err != nil {
			kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return fmt.Errorf("creating pod sandbox: %w", err)
		}
		// The sandbox's start creates the pod's cgroup: its directory comes first.
		if err := kl.volumes.MakePodDir(pod.UID); err != nil {
			return fmt.Errorf("creating the pod's directory: %w", err)
		}
		release, err := kl.starts.acquire(ctx, startSandbox)
		if err != nil {
			return err
		}
		_, err = kl.runtime.RunPodSandbox(ctx, cfg, handler)
		release()
		if err != nil && ctx.Err() != nil {
			// Cancelled: the pod is being deleted (see podWorkers.terminate). The
			// runtime may go on with the start, and make the pod's cgroup, after the
			// pod's teardown. (Without cgroups to remove, as hollow nodes, nothing
			// would ever forget the entry.)
			if kl.opts.PodCgroups != nil {
				kl.abandoned.add(pod.UID, kl.clock.Now())
			}
			return err
		}
		if err != nil {
			kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return fmt.Errorf("creating pod sandbox: %w", err)
		}
		w.state.sandboxReadyAt = kl.clock.Now()
		nrt, err := kl.readPodRuntime(ctx, string(pod.UID))
		if err != nil {
			return err
		}
		rt = nrt
		if sb = rt.readySandbox(); sb == nil {
			return errors.New("new pod sandbox is not ready")
		}
	}
	p := &podSync{kl: kl, w: w, pod: pod, rt: rt, sandbox: sb, volumes: vols}

	mainStarted, mainDone := mainProgress(pod, rt, sb.Id)
	var errs []error
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cur := rt.latestIn(c.Name, sb.Id)
		if isSidecar(pod, c) {
			// A sidecar must be running (and past its startup probe) before the next init
			// container starts; once the main containers run it restarts beside them; once
			// they are done for good it is left stopped.
			switch {
			case mainDone:
				continue
			case cur == nil:
				return p.start(ctx, c, rt.latest(c.Name))
			case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED:
				if err := p.restart(ctx, c, cur); err != nil || !mainStarted {
					return err
				}
				continue
			case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
				// A failed liveness or startup probe restarts a sidecar as a main
				// container's; meanwhile the main containers go on.
				if k := w.state.takeKill(cur.Id); k.reason != "" {
					if err := p.kill(ctx, c, cur.Id, k); err != nil || !mainStarted {
						return err
					}
					continue
				}
				if mainStarted || w.state.started(cur.Id, c) {
					continue
				}
				return nil // starting: wait for its startup probe
			default:
				return nil // created: started on a later sync
			}
		}
		switch {
		case cur == nil:
			return p.start(ctx, c, rt.latest(c.Name))
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && cur.ExitCode == 0:
			continue // done; next init container
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			if shouldRestart(pod, c, cur) {
				return p.restart(ctx, c, cur)
			}
			return nil // the pod has failed
		default:
			return nil // running: wait for it
		}
	}

	w.state.setResize(resizeState{}) // set again below while a resize is refused or failing
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cur := rt.latest(c.Name)
		inSandbox := cur != nil && rt.sandboxOf[cur.Id] == sb.Id
		switch {
		case cur == nil || !inSandbox:
			errs = append(errs, p.start(ctx, c, cur))
		case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && specChanged(cur, c):
			// The image of a running pod's container was changed: replace the container,
			// whatever the restart policy, as upstream does.
			msg := fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
			kl.recorder.Eventf(containerRef(pod, c.Name), v1.EventTypeNormal, "Killing", "%s", msg)
			if err := kl.runtime.StopContainer(ctx, cur.Id, gracePeriod(pod)); err != nil {
				errs = append(errs, err)
				continue
			}
			// The new spec's back-off (usually none yet) counted from the last exit
			// before, as upstream's: the replacement's own crashes then back off from
			// the initial delay.
			if prev := rt.latestExited(c.Name); prev != nil && p.backingOff(c, time.Unix(0, prev.FinishedAt)) {
				continue
			}
			errs = append(errs, p.start(ctx, c, cur))
		case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			if stopped, err := p.resize(ctx, c, cur); err != nil || stopped {
				errs = append(errs, err)
				continue
			}
			if k := w.state.takeKill(cur.Id); k.reason != "" {
				errs = append(errs, p.kill(ctx, c, cur.Id, k))
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_CREATED:
			// Created but never started (an earlier start failed): try again.
			if err := kl.runtime.StartContainer(uncancelled(ctx), cur.Id); err != nil {
				w.state.setWaiting(c.Name, reasonRunError, err.Error())
				errs = append(errs, err)
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && shouldRestart(pod, c, cur):
			errs = append(errs, p.restart(ctx, c, cur))
		}
	}
	// Ephemeral containers run once each, never restarted, while the pod runs.
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		c := (*v1.Container)(&ec.EphemeralContainerCommon)
		if mainDone || rt.latest(c.Name) != nil {
			continue
		}
		if t := ec.TargetContainerName; t != "" {
			target := rt.latestIn(t, sb.Id)
			if target == nil || target.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue // started once its target runs
			}
			p.targetID = target.Id
		}
		errs = append(errs, p.start(ctx, c, nil))
		p.targetID = ""
	}
	if mainDone {
		// The main containers finished for good: stop the sidecars, as upstream does.
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if cur := rt.latestIn(c.Name, sb.Id); isSidecar(pod, c) && cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				kl.recorder.Eventf(containerRef(pod, c.Name), v1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
				errs = append(errs, kl.runtime.StopContainer(ctx, cur.Id, gracePeriod(pod)))
			}
		}
	}
	kl.removeDeadInstances(ctx, pod, rt)
	return errors.Join(errs...)
}

// mainProgress reports whether any main container has run in the sandbox (the init phase
// is over) and whether all of them exited for good (none will restart).
func mainProgress(pod *v1.Pod, rt *podRuntime, sandboxID string) (started, done bool) {
	done = len(pod.Spec.Containers) > 0
	for _, c := range pod.Spec.Containers {
		cur := rt.latestIn(c.Name, sandboxID)
		if cur != nil {
			started = true
		}
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_EXITED || shouldRestart(pod, &c, cur) {
			done = false
		}
	}
	return started, done
}

// specChanged reports whether a container instance was created from another version of
// its spec (the hash annotation differs); instances without the annotation are left alone.
func specChanged(cur *runtimeapi.ContainerStatus, c *v1.Container) bool {
	h, ok := cur.GetAnnotations()[annoContainerHash]
	return ok && h != containerHash(c)
}

// removeDeadInstances keeps, per container, the newest instance and the one before it
// (for lastState), and drops older exited ones and empty old sandboxes, so that a crash
// looping pod costs bounded memory in the runtime.
func (kl *Kubelet) removeDeadInstances(ctx context.Context, pod *v1.Pod, rt *podRuntime) {
	kept := map[string]bool{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for i, inst := range rt.instances(c.Name) {
				if i >= 2 && inst.State == runtimeapi.ContainerState_CONTAINER_EXITED {
					if err := kl.runtime.RemoveContainer(ctx, inst.Id); err == nil {
						continue
					}
				}
				kept[rt.sandboxOf[inst.Id]] = true
			}
		}
	}
	for i, sb := range rt.sandboxes {
		if i > 0 && sb.State != runtimeapi.PodSandboxState_SANDBOX_READY && !kept[sb.Id] {
			_ = kl.runtime.RemovePodSandbox(ctx, sb.Id)
		}
	}
}

// podSync carries what one sync of one pod needs to start containers.
type podSync struct {
	kl      *Kubelet
	w       *podWorker
	pod     *v1.Pod
	rt      *podRuntime
	sandbox *runtimeapi.PodSandboxStatus
	// sandboxConfig is the sandbox's CRI config, which image pulls and container
	// creation pass to the runtime; start computes it the first time it is needed, so
	// that a sync with nothing to start (most) neither builds it nor reads the host's
	// resolv.conf for it.
	sandboxConfig *runtimeapi.PodSandboxConfig
	volumes       map[string]volume.Mounted
	// targetID is the container whose process namespace the ephemeral container being
	// started joins (its targetContainerName), or "".
	targetID string
}

// backoffKey names a back-off of the pod; forget drops a pod's by its UID prefix.
func backoffKey(pod *v1.Pod, name string) string { return string(pod.UID) + "/" + name }

// restartBackoffKey names a container's restart back-off: its pod and name, and the
// parts of its spec whose change starts the back-off afresh, its image and resources,
// as upstream keys it. A crash-looping container whose image is updated (a fix rolled
// out) starts at once and backs off from the initial delay, not from the cap.
func restartBackoffKey(pod *v1.Pod, c *v1.Container) string {
	h := fnv.New64a()
	h.Write([]byte(c.Image))
	h.Write([]byte{0})
	h.Write([]byte(c.Resources.String()))
	return backoffKey(pod, c.Name) + "/" + strconv.FormatUint(h.Sum64(), 16)
}

// restart starts a new instance of an exited container, unless its back-off says wait.
func (p *podSync) restart(ctx context.Context, c *v1.Container, prev *runtimeapi.ContainerStatus) error {
	if p.backingOff(c, time.Unix(0, prev.FinishedAt)) {
		return nil
	}
	if podrestart.RestartsAll(c, prev.ExitCode) {
		// Not silent: the pod's other containers keep running.
		p.kl.recorder.Eventf(containerRef(p.pod, c.Name), v1.EventTypeWarning, "RestartAllContainersUnsupported",
			"Container %s exited with code %d, for which its restart rules restart every container of the pod; this kubelet restarts only this container", c.Name, prev.ExitCode)
	}
	return p.start(ctx, c, prev)
}

// kill stops a running container a failed probe asked to kill, saying why, with the
// grace period asked; the next sync restarts it if its policy says so.
func (p *podSync) kill(ctx context.Context, c *v1.Container, id string, k killRequest) error {
	p.kl.log.Info("killing container", "pod", p.w.key, "container", c.Name, "reason", k.reason)
	p.kl.recorder.Eventf(containerRef(p.pod, c.Name), v1.EventTypeNormal, "Killing", "%s", k.reason)
	err := p.kl.runtime.StopContainer(ctx, id, k.grace)
	p.kl.workers.poke(p.w.uid)
	return err
}

// backingOff reports whether a start of c, whose last instance exited at finished, must
// wait out its back-off, and then reports the CrashLoopBackOff and wakes the pod when
// the wait ends; otherwise it counts this start, and the next one waits twice as long.
func (p *podSync) backingOff(c *v1.Container, finished time.Time) bool {
	key := restartBackoffKey(p.pod, c)
	if wait, left := p.kl.backoff.inBackoffSince(key, finished); wait {
		p.w.state.setWaiting(c.Name, reasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s",
			p.kl.backoff.delay(key), c.Name, formatPod(p.pod)))
		p.kl.workers.pokeAfter(p.w.uid, left)
		p.kl.recorder.Eventf(containerRef(p.pod, c.Name), v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s",
			c.Name, formatPod(p.pod))
		return true
	}
	p.kl.backoff.next(key, finished)
	return false
}

// start pulls the image and creates and starts a container; prev is the instance it
// replaces, if any. Failures are recorded as the container's waiting reason.
func (p *podSync) start(ctx context.Context, c *v1.Container, prev *runtimeapi.ContainerStatus) error {
	var attempt uint32
	var restarts int32
	if prev != nil {
		attempt = prev.GetMetadata().GetAttempt() + 1
		restarts = restartCount(prev) + 1
	}
	if p.sandboxConfig == nil {
		cfg, err := p.kl.sandboxConfig(p.pod, p.sandbox.Metadata.GetAttempt())
		if err != nil {
			return err
		}
		p.sandboxConfig = cfg
	}
	ref := containerRef(p.pod, c.Name)
	// As upstream, a container's image volumes are pulled before its own image, and it
	// does not start without them.
	vols, err := p.imageVolumes(ctx, c)
	if err != nil {
		return nil // reported through the waiting reason
	}
	imageRef, err := p.kl.ensureImage(ctx, p.pod, c, p.sandboxConfig, p.w.state)
	if err != nil {
		return nil // reported through the waiting reason; retried with image back-off
	}
	cfg, err := p.kl.containerConfig(ctx, p.pod, c, attempt, restarts, imageRef, p.sandbox, vols)
	if err == nil && p.targetID != "" {
		ns := cfg.Linux.SecurityContext.NamespaceOptions
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, p.targetID
	}
	if err != nil {
		p.w.state.setWaiting(c.Name, reasonConfigError, err.Error())
		p.kl.recorder.Eventf(ref, v1.EventTypeWarning, "Failed", "Error: %v", err)
		// What is missing may come without an event that wakes the pod (an object
		// read through the cache, not a watch): tried again after upstream's pod
		// worker back-off.
		p.kl.workers.pokeAfter(p.w.uid, configErrorRetry)
		return nil
	}
	id, err := p.createAndStart(ctx, c, cfg)
	if err != nil {
		return err
	}
	p.kl.recorder.Eventf(ref, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	p.w.state.clearWaiting(c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg := p.kl.runHook(ctx, p.pod, id, p.kl.firstPodIP(p.pod, p.sandbox), c, c.Lifecycle.PostStart, 0); msg != "" {
			// As upstream: the event does not carry the message (it may hold secrets); the
			// container is killed and restarted per the restart policy.
			p.kl.log.Info("postStart hook failed, killing container", "pod", p.w.key, "container", c.Name, "err", msg)
			p.kl.recorder.Eventf(ref, v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
			p.kl.recorder.Eventf(ref, v1.EventTypeNormal, "Killing", "FailedPostStartHook")
			_ = p.kl.runtime.StopContainer(ctx, id, gracePeriod(p.pod))
		}
	}
	return nil
}

// uncancelled is the context a container's create and start run under: ctx's values
// without its cancellation, as upstream's kubelet runs the runtime's SyncPod. A pod
// deleted meanwhile stops its sync around these calls (the start gate's wait, image
// pulls, the sandbox), not inside them: containerd kills the shim of a start whose call
// is cancelled, and the container then ends with exit code 128, StartError "signal:
// killed", which upstream's e2e ("should never report success for a pending container")
// takes for a kubelet bug. The calls are bounded by the runtime client's timeout.
func uncancelled(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// createAndStart creates and starts a container in the pod's sandbox, holding a slot of
// the start gate for just the runtime calls.
func (p *podSync) createAndStart(ctx context.Context, c *v1.Container, cfg *runtimeapi.ContainerConfig) (string, error) {
	release, err := p.kl.starts.acquire(ctx, startContainer)
	if err != nil {
		return "", err
	}
	defer release()
	ref := containerRef(p.pod, c.Name)
	rctx := uncancelled(ctx)
	id, err := p.kl.runtime.CreateContainer(rctx, p.sandbox.Id, cfg, p.sandboxConfig)
	if err != nil {
		p.w.state.setWaiting(c.Name, reasonCreateError, err.Error())
		p.kl.recorder.Eventf(ref, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return "", err
	}
	p.kl.recorder.Eventf(ref, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if err := p.kl.runtime.StartContainer(rctx, id); err != nil {
		p.w.state.setWaiting(c.Name, reasonRunError, err.Error())
		p.kl.recorder.Eventf(ref, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return "", err
	}
	return id, nil
}

// ensureImage makes the container's image present per its imagePullPolicy and returns
// the image reference to create the container from.
func (kl *Kubelet) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig, st *podState) (string, error) {
	return kl.ensureImageFor(ctx, pod, imagePull{image: c.Image, policy: c.ImagePullPolicy, event: containerRef(pod, c.Name),
		container: c.Name, key: c.Name}, sbCfg, st)
}

// imagePull is one image the kubelet makes present for a container: its own image, or
// the image of an image volume it mounts.
type imagePull struct {
	image  string
	policy v1.PullPolicy
	// event is what the pull's events are about: the container for its own image, the
	// pod for an image volume's, as upstream.
	event *v1.ObjectReference
	// container gets the waiting reason of a failed pull.
	container string
	// key names the pull's back-off within the pod.
	key string
}

// ensureImageFor makes an image present per its pull policy (IfNotPresent when empty,
// Always for a :latest or untagged image, as upstream defaults it) and returns the
// runtime's reference to it.
func (kl *Kubelet) ensureImageFor(ctx context.Context, pod *v1.Pod, ip imagePull, sbCfg *runtimeapi.PodSandboxConfig, st *podState) (string, error) {
	spec := &runtimeapi.ImageSpec{Image: ip.image}
	policy := ip.policy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if hasLatestTag(ip.image) {
			policy = v1.PullAlways
		}
	}
	if policy != v1.PullAlways {
		status, err := kl.images.ImageStatus(ctx, spec, false)
		if err == nil && status.GetImage() != nil {
			kl.recorder.Eventf(ip.event, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", ip.image)
			return status.Image.Id, nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", ip.image)
			st.setWaiting(ip.container, reasonErrImageNeverPull, msg)
			kl.recorder.Eventf(ip.event, v1.EventTypeWarning, reasonErrImageNeverPull, "%s", msg)
			return "", errors.New(msg)
		}
	}
	// Keyed on the image too, as upstream's: a pull stuck in back-off whose image is
	// updated tries the new one at once.
	key := backoffKey(pod, ip.key) + "/image/" + ip.image
	if wait, left := kl.backoff.inBackoffSince(key, st.pullFailedAt(ip.key)); wait {
		st.setWaiting(ip.container, reasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q", ip.image))
		kl.recorder.Eventf(ip.event, v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", ip.image)
		kl.workers.pokeAfter(pod.UID, left)
		return "", errors.New("image pull back-off")
	}
	kl.recorder.Eventf(ip.event, v1.EventTypeNormal, "Pulling", "Pulling image %q", ip.image)
	began := kl.clock.Now()
	ref, err := kl.pullImage(ctx, pod, spec, sbCfg)
	if err != nil && ctx.Err() != nil {
		return "", err // cancelled: the pod is being deleted, the image did not fail
	}
	if err != nil {
		kl.recorder.Eventf(ip.event, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", ip.image, err)
		now := kl.clock.Now()
		kl.backoff.next(key, now)
		st.setPullFailed(ip.key, now)
		st.setWaiting(ip.container, reasonErrImagePull, err.Error())
		kl.workers.pokeAfter(pod.UID, kl.backoff.delay(key))
		return "", err
	}
	kl.recorder.Eventf(ip.event, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s", ip.image, kl.clock.Since(began).Round(time.Millisecond))
	return ref, nil
}

// hasLatestTag reports whether an image reference has no tag or the tag "latest", for
// which the default pull policy is Always.
func hasLatestTag(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	return !ok || tag == "latest"
}

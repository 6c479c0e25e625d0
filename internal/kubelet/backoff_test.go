package kubelet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"mizzen/internal/cri/fake"
)

// restartTimeline collects, from the statuses a test reads, when each instance of one
// container started and finished (by container ID), as a user watching the pod sees
// them: the current state gives the newest instance, lastState the one before.
type restartTimeline map[string]*instanceTimes

type instanceTimes struct{ started, finished time.Time }

func (tl restartTimeline) observe(cs *v1.ContainerStatus) {
	at := func(id string) *instanceTimes {
		if tl[id] == nil {
			tl[id] = &instanceTimes{}
		}
		return tl[id]
	}
	if r := cs.State.Running; r != nil && cs.ContainerID != "" {
		at(cs.ContainerID).started = r.StartedAt.Time
	}
	for _, t := range []*v1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.ContainerID != "" {
			it := at(t.ContainerID)
			it.started, it.finished = t.StartedAt.Time, t.FinishedAt.Time
		}
	}
}

// delays are the waits between each instance's exit and the next one's start, oldest
// first, as upstream's e2e measures them (startedAt - the previous finishedAt).
func (tl restartTimeline) delays() []time.Duration {
	var all []*instanceTimes
	for _, it := range tl {
		if !it.started.IsZero() {
			all = append(all, it)
		}
	}
	slices.SortFunc(all, func(a, b *instanceTimes) int { return a.started.Compare(b.started) })
	var out []time.Duration
	for i := 1; i < len(all); i++ {
		out = append(out, all[i].started.Sub(all[i-1].finished))
	}
	return out
}

// crashLoop runs pod "p" whose container "app" exits with 1 five seconds after each
// start, and returns a function that waits (moving the clock) until cond holds of the
// container's status, recording every status it reads into tl.
func crashLoop(t *testing.T, tl restartTimeline) (*harness, func(what string, cond func(*v1.ContainerStatus) bool) *v1.Pod) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 5 * time.Second, ExitCode: 1})
	h.start()
	// The kubelet relists the runtime once it has listed its pods, which its informer
	// reports on a real-time poll: the fake clock stands still until then, or the
	// first exit would be seen late.
	h.waitReal("the node registered", func() bool {
		_, err := h.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		return err == nil
	})
	h.createPod(newPod("p", "app"))
	return h, func(what string, cond func(*v1.ContainerStatus) bool) *v1.Pod {
		t.Helper()
		return h.waitPod("p", what, func(p *v1.Pod) bool {
			cs := containerStatus(p, "app")
			if cs == nil {
				return false
			}
			tl.observe(cs)
			return cond(cs)
		})
	}
}

func backingOff(cs *v1.ContainerStatus) bool {
	return cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonCrashLoopBackOff
}

func backoffMessage(cs *v1.ContainerStatus) string {
	if !backingOff(cs) {
		return ""
	}
	msg, _, _ := strings.Cut(cs.State.Waiting.Message, " restarting")
	return msg
}

// A crash-looping container's back-off starts afresh when its image is updated, as
// upstream keys the back-off on the container's image (and resources): whether the
// update finds the container waiting out its back-off or running, the new image
// starts at once and its own crashes wait 10 s first (upstream's e2e 'Pods should have
// their auto-restart back-off timer reset on image update': d3=5m0s).
func TestImageUpdateResetsRestartBackoff(t *testing.T) {
	for _, running := range []bool{false, true} {
		name := "while backing off"
		if running {
			name = "while running"
		}
		t.Run(name, func(t *testing.T) {
			tl := restartTimeline{}
			h, wait := crashLoop(t, tl)
			// Restarts 1-5 waited 0, 10, 20, 40 and 80 s; the next waits 160 s.
			p := wait("restart 5", func(cs *v1.ContainerStatus) bool {
				if running {
					return cs.RestartCount == 5 && cs.State.Running != nil
				}
				return cs.RestartCount == 5 && backingOff(cs)
			})
			if !running {
				if msg := backoffMessage(containerStatus(p, "app")); msg != "back-off 2m40s" {
					t.Fatalf("before the update: %q, want back-off 2m40s", msg)
				}
			}
			before := len(tl.delays())
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := h.getPod("p")
				if err != nil {
					return err
				}
				p.Spec.Containers[0].Image = "registry.local/app:2.0"
				_, err = h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			p = wait("the new image backing off", func(cs *v1.ContainerStatus) bool {
				return cs.Image == "registry.local/app:2.0" && backingOff(cs)
			})
			if msg := backoffMessage(containerStatus(p, "app")); msg != "back-off 10s" {
				t.Errorf("the new image's first back-off: %q, want back-off 10s", msg)
			}
			wait("the new image restarted", func(cs *v1.ContainerStatus) bool {
				return cs.Image == "registry.local/app:2.0" && cs.RestartCount == 7 && cs.State.Running != nil
			})
			// The new image starts at once; its first crash waits the initial 10 s.
			// Without the reset these were 160 s (or the kill) and then 300 s.
			d := tl.delays()
			if len(d) != before+2 || d[before] >= time.Minute || d[before+1] < 10*time.Second || d[before+1] >= time.Minute {
				t.Errorf("restart delays %v: the last two, after the image update, should be at once and 10 s", d)
			}
		})
	}
}

// The restart back-off is upstream's: the first restart at once, then 10 s doubling up to
// MaxContainerBackOff (300 s) and no further, each counted from the container's exit,
// with the pod worker woken when it ends (upstream's e2e 'Pods should cap back-off at
// MaxContainerBackOff' wants each delay in [300 s, 390 s]); a container that ran 10
// minutes without failing restarts at once and backs off from 10 s again.
func TestRestartBackoffDoublesToCapAndResets(t *testing.T) {
	tl := restartTimeline{}
	h, wait := crashLoop(t, tl)
	var msgs []string
	seen := func(cs *v1.ContainerStatus) {
		if m := backoffMessage(cs); m != "" && (len(msgs) == 0 || msgs[len(msgs)-1] != m) {
			msgs = append(msgs, m)
		}
	}
	wait("restart 8", func(cs *v1.ContainerStatus) bool { seen(cs); return cs.RestartCount == 8 && cs.State.Running != nil })
	want := []time.Duration{0, 10, 20, 40, 80, 160, 300, 300}
	d := tl.delays()
	if len(d) != len(want) {
		t.Fatalf("restart delays %v, want %d of them", d, len(want))
	}
	for i, w := range want {
		// Never early; late only by the time the test's clock runs ahead of the
		// kubelet, far less than the e2e's 90 s of slack at the cap.
		if w *= time.Second; d[i] < w || d[i] > w+30*time.Second {
			t.Errorf("restart %d waited %v, want %v (all: %v)", i+1, d[i], w, d)
		}
	}
	if wantMsgs := []string{"back-off 10s", "back-off 20s", "back-off 40s", "back-off 1m20s", "back-off 2m40s", "back-off 5m0s"}; !slices.Equal(msgs, wantMsgs) {
		t.Errorf("CrashLoopBackOff messages %q, want %q", msgs, wantMsgs)
	}

	// The next instance runs 11 minutes, then fails: restarted at once, as a new crash
	// loop would be.
	h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 11 * time.Minute, ExitCode: 1})
	wait("restart 9", func(cs *v1.ContainerStatus) bool { return cs.RestartCount == 9 && cs.State.Running != nil })
	h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 5 * time.Second, ExitCode: 1})
	wait("restart 10", func(cs *v1.ContainerStatus) bool { return cs.RestartCount == 10 && cs.State.Running != nil })
	if d := tl.delays(); len(d) != 10 || d[9] >= 10*time.Second {
		t.Errorf("restart delays %v: after 11 minutes' run the restart waited", d)
	}
	p := wait("backing off again", backingOff)
	if msg := backoffMessage(containerStatus(p, "app")); msg != "back-off 10s" {
		t.Errorf("after the long run: %q, want back-off 10s", msg)
	}
}

// A container stuck in ImagePullBackOff whose image is updated pulls the new image at
// once, as upstream keys the pull back-off on the image: the new image's pull had
// waited out the old one's back-off, up to 5 minutes.
func TestImageUpdateEndsImagePullBackoff(t *testing.T) {
	h := newHarness(t)
	h.rt.SetPullError("registry.local/app:bad", errors.New("manifest unknown"))
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].Image = "registry.local/app:bad"
	h.createPod(pod)
	// Failed pulls back off 10, 20, 40 s: wait for the back-off after the fourth.
	h.waitPod("p", "four failed pulls", func(*v1.Pod) bool { return h.rt.Calls("PullImage") >= 4 })
	h.waitPod("p", "ImagePullBackOff", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonImagePullBackOff
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := h.getPod("p")
		if err != nil {
			return err
		}
		p.Spec.Containers[0].Image = "registry.local/app:1.0"
		_, err = h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands still: the new image is pulled and runs without waiting.
	h.waitPodReal("p", "the new image running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.Image == "registry.local/app:1.0" && cs.State.Running != nil
	})
}

package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// The periodic sync of each pod is a minute apart (upstream's --sync-frequency), ±25%:
// what must happen sooner asks its worker for a wake of its own. These tests move the
// fake clock to the moment something is due and then wait in real time, without
// moving it further: a kubelet that did it only on the periodic sync fails them.

func isRunning(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }

func TestPodResyncsAboutEveryMinute(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	// Only the pod's own syncs list its containers: no relist after the first, no
	// local storage monitor.
	opts.RelistPeriod = time.Hour
	opts.EvictionMonitoringPeriod = -1
	h.startWith(opts)
	// The first (and only) relist, made once the pod informer has synced, pokes every
	// pod it finds: let it run before the pod exists, or it lands as one more sync at
	// whatever fake time the start took (the start waits for the informer in real time
	// while the harness moves the clock).
	h.eventually("the first relist", func() bool { return h.rt.Calls("ListContainers") > 0 })
	h.createPod(newPod("web", "app"))
	h.waitPod("web", "Running", isRunning)

	// A sync lists the pod's containers (twice); calls seen within a few seconds of
	// each other are one sync.
	var syncs []time.Time
	last := h.rt.Calls("ListContainers")
	for range 300 {
		h.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
		if n := h.rt.Calls("ListContainers"); n != last {
			last = n
			if now := h.clock.Now(); len(syncs) == 0 || now.Sub(syncs[len(syncs)-1]) > 5*time.Second {
				syncs = append(syncs, now)
			}
		}
	}
	if len(syncs) < 3 || len(syncs) > 7 {
		t.Fatalf("%d periodic syncs in five minutes (at %v), want about five", len(syncs), syncs)
	}
	for i := 1; i < len(syncs); i++ {
		if gap := syncs[i].Sub(syncs[i-1]); gap < 40*time.Second || gap > 80*time.Second {
			t.Errorf("periodic syncs %v apart, want a minute ±25%%", gap)
		}
	}
}

func TestServiceAccountTokenRewrittenWhenDue(t *testing.T) {
	h := newHarness(t)
	issued := 0
	var issuedAt time.Time // of the last token
	h.client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		h.mu.Lock()
		issued++
		n := issued
		issuedAt = h.clock.Now()
		h.mu.Unlock()
		exp := issuedAt.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", n), ExpirationTimestamp: metav1.NewTime(exp)}}, nil
	})
	opts := h.options()
	h.startWith(opts)
	pod := newPod("p", "app")
	pod.Spec.Volumes = []v1.Volume{{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
			Path: "token", ExpirationSeconds: ptr.To[int64](600)}}}}}}}
	h.createPod(pod)
	h.waitPod("p", "Running", isRunning)
	file := filepath.Join(opts.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "token", "token")
	read := func() string {
		b, _ := os.ReadFile(file)
		return string(b)
	}
	if got := read(); got != "token-1" {
		t.Fatalf("token file %q, want token-1", got)
	}
	// Due at 80% of its 600 s.
	h.mu.Lock()
	first := issuedAt
	h.mu.Unlock()
	h.clock.SetTime(first.Add(470 * time.Second))
	time.Sleep(200 * time.Millisecond)
	if got := read(); got != "token-1" {
		t.Fatalf("token file %q before the refresh is due, want token-1", got)
	}
	h.clock.SetTime(first.Add(480 * time.Second))
	h.waitReal("the token rewritten at 80% of its lifetime", func() bool { return read() == "token-2" })
}

// A ConfigMap a pod reads, created or changed, wakes the pod at once: a container
// waiting for it starts, its volume is rewritten.
func TestConfigMapChangeWakesItsPods(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	h.startWith(opts)
	ctx := context.Background()
	pod := newPod("p", "app")
	pod.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Optional: ptr.To(true)}}}}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}}
	h.createPod(pod)
	h.waitPod("p", "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonConfigError
	})
	time.Sleep(100 * time.Millisecond) // the sync that wrote it is over

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}, Data: map[string]string{"mode": "blue"}}
	if _, err := h.client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReal("the container started once its ConfigMap exists", func() bool {
		p, _ := h.getPod("p")
		return p.Status.Phase == v1.PodRunning
	})

	file := filepath.Join(opts.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~configmap", "config", "mode")
	cm.Data["mode"] = "green"
	if _, err := h.client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReal("the update written to the volume", func() bool {
		b, _ := os.ReadFile(file)
		return string(b) == "green"
	})
}

// TestStartTimeIsTheFirstSync checks that a pod's status.startTime is when its kubelet
// first synced it, before its volumes were set up, as upstream's: a token request that
// took half a minute does not move it.
func TestStartTimeIsTheFirstSync(t *testing.T) {
	h := newHarness(t)
	var requested time.Time
	h.client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		h.mu.Lock()
		requested = h.clock.Now()
		h.mu.Unlock()
		h.clock.Step(30 * time.Second) // a slow apiserver
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: "token", ExpirationTimestamp: metav1.NewTime(h.clock.Now().Add(time.Hour))}}, nil
	})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Volumes = []v1.Volume{{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
			Path: "token", ExpirationSeconds: ptr.To[int64](3600)}}}}}}}
	h.createPod(pod)
	p := h.waitPodReal("p", "Running", isRunning)
	h.mu.Lock()
	defer h.mu.Unlock()
	if requested.IsZero() {
		t.Fatal("no token was requested")
	}
	if p.Status.StartTime == nil || p.Status.StartTime.After(requested) {
		t.Errorf("startTime %v, want at or before the token request at %v (the sync's start)", p.Status.StartTime, requested)
	}
}

// The watch returning the kubelet's own status write is not a reason to sync the pod
// again (upstream's kubelet does not sync a pod whose status alone changed); a change
// by someone else is.
func TestOwnStatusWriteDoesNotResync(t *testing.T) {
	h := newHarness(t)
	// The kubelet's watch holds back the pod's updates until the pod is Running, so
	// that the echo of its status write comes after the count below.
	held := &heldUpdates{release: make(chan struct{})}
	h.wrapWatch = held.wrap
	opts := h.options()
	opts.RelistPeriod = time.Hour // no relist after the first
	opts.EvictionMonitoringPeriod = -1
	h.startWith(opts)
	h.eventually("the first relist", func() bool { return h.rt.Calls("ListContainers") > 0 })
	h.createPod(newPod("web", "app"))
	h.waitPod("web", "Running", isRunning)
	time.Sleep(200 * time.Millisecond) // the sync that wrote Running ends
	lists := h.rt.Calls("ListContainers")
	if n := held.deliver(); n == 0 {
		t.Fatal("the kubelet's watch held no update of the pod")
	}
	time.Sleep(500 * time.Millisecond) // a sync the echo caused would list the pod's containers
	if n := h.rt.Calls("ListContainers"); n != lists {
		t.Fatalf("the pod was synced again after its own status write (%d more container lists)", n-lists)
	}

	pod, err := h.getPod("web")
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels = map[string]string{"tier": "front"}
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReal("a sync after someone else's change", func() bool { return h.rt.Calls("ListContainers") > lists })
}

// heldUpdates holds back a watch's updates (not its additions) until deliver.
type heldUpdates struct {
	release   chan struct{}
	delivered chan int // how many were held, once they are delivered
}

func (hu *heldUpdates) wrap(in watch.Interface) watch.Interface {
	out := make(chan watch.Event)
	stopped := make(chan struct{})
	hu.delivered = make(chan int, 1)
	go func() {
		defer close(out)
		var held []watch.Event
		release := hu.release
		send := func(ev watch.Event) bool {
			select {
			case out <- ev:
				return true
			case <-stopped:
				return false
			}
		}
		for {
			select {
			case ev, ok := <-in.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Modified && release != nil {
					held = append(held, ev)
				} else if !send(ev) {
					return
				}
			case <-release:
				for _, ev := range held {
					if !send(ev) {
						return
					}
				}
				hu.delivered <- len(held)
				held, release = nil, nil
			}
		}
	}()
	return &wrappedWatch{in: in, out: out, stopped: stopped}
}

// deliver sends the held updates on and returns how many there were, once the watch's
// reader has taken them all.
func (hu *heldUpdates) deliver() int {
	close(hu.release)
	return <-hu.delivered
}

type wrappedWatch struct {
	in      watch.Interface
	out     chan watch.Event
	stopped chan struct{}
	once    sync.Once
}

func (w *wrappedWatch) Stop() {
	w.once.Do(func() { close(w.stopped); w.in.Stop() })
}

func (w *wrappedWatch) ResultChan() <-chan watch.Event { return w.out }

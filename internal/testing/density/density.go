// Package density is the workload of upstream's density test, shared by the density
// benchmark (bench/density) and its correctness test (test/e2e): pods in Deployments
// created at a fixed rate, a watch that records what happened to every pod (when it
// appeared, was bound and was seen Running, by the watcher's clock and by the pod's
// own timestamps), and the checks a correct cluster passes whatever its speed: every
// pod bound once, no node over its pods capacity, every pod Running, then every pod
// gone after the Deployments are deleted.
package density

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Image is the pods' image; hollow nodes are told it is present (--preloaded-images),
// so that startup excludes pulls, as upstream's SLO does.
const Image = "registry.k8s.io/pause:3.10"

// Deployments creates total pods as Deployments of size replicas (the last one
// smaller) in namespace, one Deployment every size/rate seconds, so that pods are
// asked for at rate per second; it returns when the last Deployment is created.
func Deployments(ctx context.Context, c kubernetes.Interface, namespace string, total, size int, rate float64) error {
	interval := time.Duration(float64(size) / rate * float64(time.Second))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; i*size < total; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		n := int32(min(size, total-i*size))
		if err := create(ctx, c, namespace, deployment(fmt.Sprintf("density-%04d", i), n)); err != nil {
			return fmt.Errorf("creating deployment %d: %w", i, err)
		}
	}
	return nil
}

// create creates d, retrying (up to 5 times, a second apart) what a loaded server
// answers that a client is meant to retry: a server timeout, too many requests, or an
// internal error such as etcd's "request timed out". A retried create that had in
// fact been stored finds the Deployment there, which counts as created.
func create(ctx context.Context, c kubernetes.Interface, namespace string, d *appsv1.Deployment) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		_, err = c.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{})
		switch {
		case err == nil, attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) && !apierrors.IsInternalError(err):
			return err
		}
	}
	return err
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"name": name, "group": "density"}
	grace := int64(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "pause", Image: Image, ImagePullPolicy: corev1.PullIfNotPresent,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("10M")}}}},
				},
			},
		},
	}
}

// DeleteDeployments deletes every Deployment of namespace, its ReplicaSets and pods
// left to the garbage collector, as upstream's test deletes them.
func DeleteDeployments(ctx context.Context, c kubernetes.Interface, namespace string) error {
	list, err := c.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, d := range list.Items {
		if err := c.AppsV1().Deployments(namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			return fmt.Errorf("deleting deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// Pod is what the watch saw of one pod.
type Pod struct {
	Name string
	// Created is the pod's creationTimestamp (whole seconds); Seen, Bound and Running
	// are the watcher's clock when it first saw the pod, its node, and it Running.
	Created              time.Time
	Seen, Bound, Running time.Time
	// Scheduled is the PodScheduled condition's time, KubeletStart the pod's
	// status.startTime (when its kubelet first acted on it), Started the last
	// container's start (whole seconds, from the pod's status).
	Scheduled, KubeletStart, Started time.Time
	Node                             string
	// Rebound names a second node the pod was seen on; a pod is bound once.
	Rebound string
	Deleted time.Time
}

// Tracker watches the pods of a namespace and records every pod's history.
type Tracker struct {
	mu      sync.Mutex
	pods    map[types.UID]*Pod
	live    int // pods not yet deleted
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	stop    chan struct{}
}

// Track starts watching namespace's pods.
func Track(c kubernetes.Interface, namespace string) (*Tracker, error) {
	t := &Tracker{pods: map[types.UID]*Pod{}, stop: make(chan struct{})}
	t.factory = informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace))
	inf := t.factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { t.observe(obj, time.Now()) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				t.deleted(p, time.Now())
			}
		},
	}); err != nil {
		return nil, err
	}
	t.synced = inf.HasSynced
	t.factory.Start(t.stop)
	if !cache.WaitForCacheSync(t.stop, t.synced) {
		return nil, fmt.Errorf("the pods of %s never synced", namespace)
	}
	return t, nil
}

// Stop ends the watch.
func (t *Tracker) Stop() {
	close(t.stop)
	t.factory.Shutdown()
}

func (t *Tracker) observe(obj any, now time.Time) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.pods[p.UID]
	if rec == nil {
		rec = &Pod{Name: p.Name, Created: p.CreationTimestamp.Time, Seen: now}
		t.pods[p.UID] = rec
		t.live++
	}
	if p.Spec.NodeName != "" {
		switch {
		case rec.Node == "":
			rec.Node, rec.Bound = p.Spec.NodeName, now
		case rec.Node != p.Spec.NodeName:
			rec.Rebound = p.Spec.NodeName
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && rec.Scheduled.IsZero() {
			rec.Scheduled = cond.LastTransitionTime.Time
		}
	}
	if p.Status.StartTime != nil && rec.KubeletStart.IsZero() {
		rec.KubeletStart = p.Status.StartTime.Time
	}
	if p.Status.Phase == corev1.PodRunning && rec.Running.IsZero() && allRunning(p) {
		rec.Running = now
		for _, cs := range p.Status.ContainerStatuses {
			if r := cs.State.Running; r != nil && r.StartedAt.After(rec.Started) {
				rec.Started = r.StartedAt.Time
			}
		}
	}
}

func allRunning(p *corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

func (t *Tracker) deleted(p *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rec := t.pods[p.UID]; rec != nil && rec.Deleted.IsZero() {
		rec.Deleted = now
		t.live--
	}
}

// Counts are how many pods the watch has seen, seen Running, and seen deleted, and
// how many exist now.
type Counts struct{ Seen, Running, Deleted, Live int }

// Counts says where the pods are.
func (t *Tracker) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := Counts{Seen: len(t.pods), Live: t.live}
	for _, p := range t.pods {
		if !p.Running.IsZero() {
			c.Running++
		}
		if !p.Deleted.IsZero() {
			c.Deleted++
		}
	}
	return c
}

// Pods is a copy of every pod's record, by name.
func (t *Tracker) Pods() []Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Pod, 0, len(t.pods))
	for _, p := range t.pods {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Wait polls cond every second until it holds, ctx ends or timeout passes; the error
// says what progress said last.
func Wait(ctx context.Context, timeout time.Duration, cond func() bool, progress func() string) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v: %s", timeout, progress())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// Rebound are the pods the watch saw on two nodes, as "pod: node1 then node2".
func Rebound(pods []Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Rebound != "" {
			out = append(out, fmt.Sprintf("%s: %s then %s", p.Name, p.Node, p.Rebound))
		}
	}
	return out
}

// OverCapacity lists the nodes holding more pods that are not finished than their
// allocatable pods, as "node: n pods of m".
func OverCapacity(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	held := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			held[p.Spec.NodeName]++
		}
	}
	var out []string
	for _, n := range nodes.Items {
		if capacity := n.Status.Allocatable.Pods().Value(); held[n.Name] > capacity {
			out = append(out, fmt.Sprintf("%s: %d pods of %d", n.Name, held[n.Name], capacity))
		}
	}
	return out, nil
}

// ReadyNodes counts the nodes that are Ready and schedulable: no not-ready or
// unreachable taint (the node lifecycle controller lifts the one admission puts on a
// new node).
func ReadyNodes(ctx context.Context, c kubernetes.Interface) (int, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, n := range list.Items {
		ok := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				ok = false
			}
		}
		if ok {
			ready++
		}
	}
	return ready, nil
}

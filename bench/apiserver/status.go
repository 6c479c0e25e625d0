package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/benchutil"
)

// statusWriteSeconds is how long each kind of status write runs.
const statusWriteSeconds = 5

// statusWrites measures the writes a cluster makes most once its pods exist: status
// written by the kubelet (a strategic merge patch of pods/status, as its status
// manager sends) and by controllers (a PUT of pods/status with the object they hold).
// Each worker owns every workers-th pod, so no two writes race for one pod and no
// conflict is retried; each write flips the pod's Ready condition. profile, when
// set, is started before the first write and stopped after the last.
func statusWrites(ctx context.Context, c benchutil.Cluster, client kubernetes.Interface, nPods, workers int, f *figures, profile func(bool)) error {
	pods, err := listBenchPods(ctx, client, nPods)
	if err != nil {
		return fmt.Errorf("status writes: %w", err)
	}
	// One profile covers both kinds of write (and the list between them).
	if profile != nil {
		profile(true)
		defer profile(false)
	}
	measure := func(label string, write func(i, n int) error) error {
		return measureCalls(c, nPods, workers, f, label, write)
	}
	readyStatus := func(n int) corev1.ConditionStatus {
		if n%2 == 0 {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	if err := measure("pod status patch", func(i, n int) error {
		now := time.Now().UTC().Format(time.RFC3339)
		patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"$setElementOrder/conditions":[{"type":"Ready"}],"conditions":[{"type":"Ready","status":%q,"lastProbeTime":null,"lastTransitionTime":%q}]}}`,
			pods[i].UID, readyStatus(n), now)
		_, err := client.CoreV1().Pods("default").Patch(ctx, pods[i].Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		return err
	}); err != nil {
		return err
	}
	// The patches moved every pod's resourceVersion on: the PUTs start from fresh copies.
	if pods, err = listBenchPods(ctx, client, nPods); err != nil {
		return fmt.Errorf("status writes: %w", err)
	}
	return measure("pod status update", func(i, n int) error {
		pod := &pods[i]
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: readyStatus(n + 1), LastTransitionTime: metav1.Now()}}
		updated, err := client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		*pod = *updated
		return nil
	})
}

// measureCalls runs call (the n-th call for pod i) from every worker for
// statusWriteSeconds, each worker taking every workers-th pod, and records the rate
// and the server's CPU per call as label.
func measureCalls(c benchutil.Cluster, nPods, workers int, f *figures, label string, call func(i, n int) error) error {
	var done, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := benchutil.CPU(c.ServerPIDs())
	deadline := time.Now().Add(statusWriteSeconds * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				for i := w; i < nPods && time.Now().Before(deadline); i += workers {
					if err := call(i, n); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					done.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	if k := failed.Load(); k > 0 {
		return fmt.Errorf("%d %s failed, the first: %v", k, label, firstErr.Load())
	}
	f.set(label+"/s", float64(done.Load())/statusWriteSeconds)
	f.set("server CPU µs per "+label, (benchutil.CPU(c.ServerPIDs())-cpu0)*1e6/float64(max(done.Load(), 1)))
	return nil
}

// tokenRequests measures the call each pod's start makes once: a service account token
// bound to the pod (POST serviceaccounts/default/token with a boundObjectRef, as the
// kubelet asks for a projected token volume), which the server signs after reading the
// service account and the pod.
func tokenRequests(ctx context.Context, c benchutil.Cluster, client kubernetes.Interface, nPods, workers int, f *figures) error {
	pods, err := listBenchPods(ctx, client, nPods)
	if err != nil {
		return fmt.Errorf("token requests: %w", err)
	}
	expiration := int64(3607) // the kubelet's default for a projected token
	return measureCalls(c, nPods, workers, f, "pod-bound token request", func(i, _ int) error {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &expiration,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pods[i].Name, UID: pods[i].UID},
		}}
		_, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", req, metav1.CreateOptions{})
		return err
	})
}

// listBenchPods lists the benchmark's pods in "default" and returns the first nPods.
func listBenchPods(ctx context.Context, client kubernetes.Interface, nPods int) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(list.Items) < nPods {
		return nil, fmt.Errorf("listed %d pods, want %d", len(list.Items), nPods)
	}
	return list.Items[:nPods], nil
}

package workloads

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/controller/util"
)

// watchPods lists the namespace's pods every few milliseconds until stop is called,
// handing each consistent snapshot to see.
func watchPods(ctx context.Context, t *testing.T, client kubernetes.Interface, see func([]corev1.Pod)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				see(pods.Items)
			} else if ctx.Err() == nil {
				t.Logf("list pods: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// A rolling update, watched throughout as a user would with `kubectl get pods -w`:
// never more pods than replicas+maxSurge, never fewer available than
// replicas-maxUnavailable, and at the end every pod is of the new revision.
func TestRollingUpdateStaysWithinItsBounds(t *testing.T) {
	tests := []struct {
		replicas                 int32
		maxSurge, maxUnavailable intstr.IntOrString
		most, fewest             int // the bounds: replicas+surge, replicas-unavailable
	}{
		{3, intstr.FromInt32(1), intstr.FromInt32(0), 4, 3},
		{3, intstr.FromInt32(0), intstr.FromInt32(1), 3, 2},
		{4, intstr.FromString("50%"), intstr.FromString("25%"), 6, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d replicas, maxSurge %s, maxUnavailable %s", tt.replicas, tt.maxSurge.String(), tt.maxUnavailable.String()), func(t *testing.T) {
			ctx, client := cluster(t)
			kubelet(ctx, t, client)
			labels := map[string]string{"app": "web"}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr(tt.replicas),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}}},
					Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &tt.maxSurge, MaxUnavailable: &tt.maxUnavailable}},
				},
			}
			if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			get := func() *appsv1.Deployment {
				got, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			eventually(t, "the first rollout", func() (bool, error) { return rolledOut(get()), nil })

			var mu sync.Mutex
			most, fewest := 0, int(tt.replicas)
			stop := watchPods(ctx, t, client, func(pods []corev1.Pod) {
				running, available := 0, 0
				for i := range pods {
					if pods[i].DeletionTimestamp != nil {
						continue // terminating pods count in neither bound, as upstream
					}
					running++
					if util.IsPodReady(&pods[i]) {
						available++
					}
				}
				mu.Lock()
				most, fewest = max(most, running), min(fewest, available)
				mu.Unlock()
			})
			updated := get()
			updated.Spec.Template.Spec.Containers[0].Image = "nginx:2"
			if _, err := client.AppsV1().Deployments("default").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the second rollout", func() (bool, error) {
				d := get()
				return d.Status.ObservedGeneration >= d.Generation && rolledOut(d), nil
			})
			stop()
			mu.Lock()
			defer mu.Unlock()
			t.Logf("observed at most %d pods, at least %d available", most, fewest)
			if most > tt.most {
				t.Errorf("%d pods at once, more than replicas+maxSurge = %d", most, tt.most)
			}
			if fewest < tt.fewest {
				t.Errorf("only %d pods available at one point, fewer than replicas-maxUnavailable = %d", fewest, tt.fewest)
			}
			if rev := get().Annotations["deployment.kubernetes.io/revision"]; rev != "2" {
				t.Errorf("deployment revision %q, want 2", rev)
			}
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image != "nginx:2" {
					t.Errorf("pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
				}
			}
		})
	}
}

// A Job with parallelism 3 and completions 6 never runs more than three pods at once
// and completes after six successes.
func TestJobWithParallelismThreeAndSixCompletions(t *testing.T) {
	ctx, client := cluster(t)
	var mu sync.Mutex
	most := 0
	stop := watchPods(ctx, t, client, func(pods []corev1.Pod) {
		active := 0
		for i := range pods {
			if pods[i].DeletionTimestamp == nil && !util.IsPodTerminal(&pods[i]) {
				active++
			}
		}
		mu.Lock()
		most = max(most, active)
		mu.Unlock()
	})
	kubelet(ctx, t, client)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr(int32(3)),
			Completions: ptr(int32(6)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "busybox"}}}},
		},
	}
	if _, err := client.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *batchv1.Job
	eventually(t, "the job to complete", func() (bool, error) {
		var err error
		if got, err = client.BatchV1().Jobs("default").Get(ctx, "batch", metav1.GetOptions{}); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	stop()
	if got.Status.Succeeded != 6 || got.Status.Active != 0 || got.Status.Failed != 0 || got.Status.CompletionTime == nil {
		t.Errorf("status succeeded %d active %d failed %d completionTime %v, want 6, 0, 0 and a time",
			got.Status.Succeeded, got.Status.Active, got.Status.Failed, got.Status.CompletionTime)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 3 || most == 0 {
		t.Errorf("%d pods active at once, want at most parallelism 3 (and some)", most)
	}
}

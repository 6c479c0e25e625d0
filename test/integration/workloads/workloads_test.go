// Package workloads runs the workload controllers against a real mizzen apiserver on
// embedded etcd, with the test playing the kubelet (there is no scheduler or kubelet
// here: pods are marked Running and Ready, or Succeeded, through pods/status).
package workloads

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/cronjob"
	"mizzen/internal/controller/daemonset"
	"mizzen/internal/controller/deployment"
	"mizzen/internal/controller/disruption"
	"mizzen/internal/controller/job"
	"mizzen/internal/controller/replicaset"
	"mizzen/internal/controller/statefulset"
	"mizzen/internal/testing/apiserver"
)

func ptr[T any](v T) *T { return &v }

// cluster starts the apiserver and the workload controllers (the cronjob controller on
// clk). The controllers run as the controller-manager does, each as its own
// ServiceAccount under RBAC, so that these tests also prove upstream's
// system:controller:* roles grant them what they do; the returned client is the admin's.
func cluster(t *testing.T) (context.Context, kubernetes.Interface) {
	return clusterWithClock(t, clock.RealClock{})
}

func clusterWithClock(t *testing.T, clk clock.Clock) (context.Context, kubernetes.Interface) {
	t.Helper()
	srv := apiserver.StartServer(t)
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	cmConfig, err := srv.ComponentConfig("controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		t.Fatal(err)
	}
	cmConfig.QPS, cmConfig.Burst = 1000, 2000
	cm := kubernetes.NewForConfigOrDie(cmConfig)
	// Each controller writes as its own ServiceAccount, as under
	// --use-service-account-credentials; the informers list as the manager.
	as := func(account string) kubernetes.Interface {
		cfg, err := srv.ComponentConfig("controller-"+account, "system:serviceaccount:kube-system:"+account,
			[]string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst = 1000, 2000
		return kubernetes.NewForConfigOrDie(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactory(cm, 0)
	deployment.New(as("deployment-controller"), f, clock.RealClock{}).Run(ctx, 2)
	replicaset.NewReplicaSet(as("replicaset-controller"), f, clock.RealClock{}).Run(ctx, 2)
	job.New(as("job-controller"), f, clock.RealClock{}).Run(ctx, 2)
	statefulset.New(as("statefulset-controller"), f, clock.RealClock{}).Run(ctx, 2)
	daemonset.New(as("daemon-set-controller"), f, clock.RealClock{}).Run(ctx, 2)
	disruption.New(as("disruption-controller"), f, clock.RealClock{}).Run(ctx, 2)
	cronjob.New(as("cronjob-controller"), f, clk).Run(ctx, 2)
	f.Start(ctx.Done())
	return ctx, client
}

// kubelet finishes or readies every pod it sees until ctx ends: pods of Jobs succeed,
// all others become Running and Ready.
func kubelet(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	go func() {
		for ctx.Err() == nil {
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodRunning {
						continue
					}
					now := metav1.Now()
					if _, isJob := p.Labels["batch.kubernetes.io/job-name"]; isJob {
						p.Status.Phase = corev1.PodSucceeded
						p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
							State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: now}}}}
					} else {
						p.Status.Phase = corev1.PodRunning
						p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
					}
					if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
						t.Logf("kubelet: status of %s: %v", p.Name, err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// rolledOut is what `kubectl rollout status` checks.
func rolledOut(d *appsv1.Deployment) bool {
	want := *d.Spec.Replicas
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.Replicas == want && d.Status.AvailableReplicas == want
}

func TestDeploymentRollsOutAndUpdates(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0))}},
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
	if rev := get().Annotations["deployment.kubernetes.io/revision"]; rev != "1" {
		t.Errorf("revision %q, want 1", rev)
	}

	updated := get()
	updated.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	if _, err := client.AppsV1().Deployments("default").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second rollout", func() (bool, error) {
		d := get()
		if !rolledOut(d) {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "NewReplicaSetAvailable" {
				return true, nil
			}
		}
		return false, nil
	})
	rss, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Fatalf("%d replica sets, want 2", len(rss.Items))
	}
	for _, rs := range rss.Items {
		want := int32(0)
		if rs.Spec.Template.Spec.Containers[0].Image == "nginx:2" {
			want = 3
		}
		if *rs.Spec.Replicas != want {
			t.Errorf("replica set %s (%s) has %d replicas, want %d", rs.Name, rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas, want)
		}
	}
	eventually(t, "ScalingReplicaSet events on the deployment", func() (bool, error) {
		events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == "web" && e.Reason == "ScalingReplicaSet" &&
				e.Source.Component == "deployment-controller" {
				return true, nil
			}
		}
		return false, nil
	})
	eventually(t, "old pods to go", func() (bool, error) {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
				if p.Spec.Containers[0].Image != "nginx:2" {
					return false, nil
				}
			}
		}
		return n == 3, nil
	})
}

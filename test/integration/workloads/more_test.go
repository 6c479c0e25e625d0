package workloads

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestStatefulSetWithClaims(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	labels := map[string]string{"app": "db"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(3)),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
	if _, err := client.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 ready replicas", func() (bool, error) {
		got, err := client.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ReadyReplicas == 3 && got.Status.CurrentRevision != "" && got.Status.CurrentRevision == got.Status.UpdateRevision, nil
	})
	claims, err := client.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range claims.Items {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"data-db-0", "data-db-1", "data-db-2"}) {
		t.Errorf("claims %v", names)
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[statefulsetPodName] != p.Name || p.Spec.Hostname != p.Name {
			t.Errorf("pod %s labels %v hostname %q", p.Name, p.Labels, p.Spec.Hostname)
		}
	}
}

const statefulsetPodName = "statefulset.kubernetes.io/pod-name"

func TestDaemonSetOnEveryNode(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	for _, name := range []string{"node-a", "node-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}},
		},
	}
	if _, err := client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a ready daemon on both nodes", func() (bool, error) {
		got, err := client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status
		return st.DesiredNumberScheduled == 2 && st.NumberReady == 2 && st.UpdatedNumberScheduled == 2 && st.NumberAvailable == 2, nil
	})
	revs, err := client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 1 {
		t.Errorf("%d controller revisions, want 1", len(revs.Items))
	}
}

func TestPodDisruptionBudgetOverDeployment(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	labels := map[string]string{"app": "api"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "api:1"}}}},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the budget to allow one disruption", func() (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status
		return st.ExpectedPods == 3 && st.CurrentHealthy == 3 && st.DesiredHealthy == 2 && st.DisruptionsAllowed == 1, nil
	})
}

func TestCronJobOnAnInjectedClock(t *testing.T) {
	// The controller's clock stands 5 s past a full minute that is at least
	// one minute ahead, so the CronJob (stamped by the apiserver's real clock
	// after the cluster has started) is always created before that minute.
	next := time.Now().Add(2 * time.Minute).Truncate(time.Minute).Add(5 * time.Second)
	ctx, client := clusterWithClock(t, clocktesting.NewFakeClock(next))
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "tick", Image: "busybox"}}}}}},
		},
	}
	if _, err := client.BatchV1().CronJobs("default").Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("tick-%d", next.Truncate(time.Minute).Unix()/60)
	eventually(t, "job "+want, func() (bool, error) {
		got, err := client.BatchV1().CronJobs("default").Get(ctx, "tick", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(got.Status.Active) != 1 || got.Status.Active[0].Name != want || got.Status.LastScheduleTime == nil {
			return false, nil
		}
		_, err = client.BatchV1().Jobs("default").Get(ctx, want, metav1.GetOptions{})
		return err == nil, err
	})
}

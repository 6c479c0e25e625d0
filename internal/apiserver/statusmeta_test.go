package apiserver_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestStatusWriteKeepsMetadata: a write through <resource>/status keeps the labels and
// annotations it sends where upstream's status strategy resets only the spec (jobs, as
// the conformance spec "should apply changes to a job status" patches an annotation
// with the status), keeps a deployment's labels and a pod's owners as stored, and
// changes no metadata at all where upstream resets it (FlowSchema).
func TestStatusWriteKeepsMetadata(t *testing.T) {
	client := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	const patch = `{"metadata":{"labels":{"l":"patched"},"annotations":{"patchedstatus":"true"}},"status":{}}`
	check := func(kind string, meta metav1.Object, wantLabel, wantAnnotation bool) {
		t.Helper()
		if got := meta.GetLabels()["l"] == "patched"; got != wantLabel {
			t.Errorf("%s: label changed through status = %v, want %v (labels %v)", kind, got, wantLabel, meta.GetLabels())
		}
		if got := meta.GetAnnotations()["patchedstatus"] == "true"; got != wantAnnotation {
			t.Errorf("%s: annotation changed through status = %v, want %v (annotations %v)", kind, got, wantAnnotation, meta.GetAnnotations())
		}
	}

	job, err := client.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "status-meta"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := client.BatchV1().Jobs("default").Patch(ctx, job.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	check("job (patch response)", patched, true, true)
	got, err := client.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("job (stored)", got, true, true)
	// An update through status of an object with a changed spec keeps the spec.
	got.Spec.Parallelism = new(int32)
	got.Annotations = map[string]string{"updated": "yes"}
	updated, err := client.BatchV1().Jobs("default").UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *updated.Spec.Parallelism != 1 || updated.Annotations["updated"] != "yes" {
		t.Errorf("job after UpdateStatus: parallelism %d (want 1), annotations %v", *updated.Spec.Parallelism, updated.Annotations)
	}

	labels := map[string]string{"app": "d"}
	dep, err := client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "status-meta"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patchedDep, err := client.AppsV1().Deployments("default").Patch(ctx, dep.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	check("deployment", patchedDep, false, true)

	pod, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "status-meta"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podPatch := `{"metadata":{"labels":{"l":"patched"},"annotations":{"patchedstatus":"true"},` +
		`"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"0b7c3a3e-0000-4000-8000-000000000001"}]},"status":{}}`
	patchedPod, err := client.CoreV1().Pods("default").Patch(ctx, pod.Name, types.MergePatchType, []byte(podPatch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	check("pod", patchedPod, true, true)
	if len(patchedPod.OwnerReferences) != 0 {
		t.Errorf("pod: owners changed through status: %v", patchedPod.OwnerReferences)
	}

	fs, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "status-meta"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patchedFS, err := client.FlowcontrolV1().FlowSchemas().Patch(ctx, fs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	check("flowschema", patchedFS, false, false)
}

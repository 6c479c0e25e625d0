package ephemeral

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/controller/util/controllertest"
)

func TestCreatesOwnedClaim(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "pod-uid"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
			VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
			}}}}}},
	}
	foreign := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other-scratch"}}
	other := pod.DeepCopy()
	other.Name, other.UID = "other", "other-uid"
	client := fake.NewClientset(pod, other, foreign)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f.Core().V1().Pods(), f.Core().V1().PersistentVolumeClaims())
	controllertest.StartInformers(t, t.Context(), f)

	if err := c.sync(t.Context(), "default/web"); err != nil {
		t.Fatal(err)
	}
	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "web-scratch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(pvc, pod) || pvc.Labels["app"] != "web" || len(pvc.Spec.AccessModes) != 1 {
		t.Errorf("claim = %+v", pvc)
	}

	// A claim of that name the pod does not own is not taken over, and the pod says so.
	if err := c.sync(t.Context(), "default/other"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "other-scratch", metav1.GetOptions{})
	if len(got.OwnerReferences) != 0 {
		t.Errorf("foreign claim adopted: %+v", got.OwnerReferences)
	}
}

package volumeprotection

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/controller/util/controllertest"
)

func claim(name string, deleting bool, finalizers ...string) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Finalizers: finalizers}}
	if deleting {
		now := metav1.Now()
		pvc.DeletionTimestamp = &now
	}
	return pvc
}

func podUsing(name, claimName string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}},
		Status: v1.PodStatus{Phase: phase},
	}
}

func TestPVCProtection(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		want    []string // the claim's finalizers after one sync
	}{
		{"a new claim gets the finalizer", []runtime.Object{claim("c", false)}, []string{PVCFinalizer}},
		{"a deleted claim in use keeps it", []runtime.Object{claim("c", true, PVCFinalizer), podUsing("p", "c", v1.PodRunning)}, []string{PVCFinalizer}},
		{"a deleted unused claim loses it", []runtime.Object{claim("c", true, PVCFinalizer), podUsing("p", "other", v1.PodRunning)}, nil},
		{"a finished pod does not hold the claim", []runtime.Object{claim("c", true, PVCFinalizer), podUsing("p", "c", v1.PodSucceeded)}, nil},
		{"an ephemeral volume's claim is its pod's", []runtime.Object{claim("p-scratch", true, PVCFinalizer, "other/keep"), &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
			Spec:       v1.PodSpec{Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}},
		}}, []string{PVCFinalizer, "other/keep"}},
		{"a deleted claim without the finalizer is left alone", []runtime.Object{claim("c", true, "other/keep")}, []string{"other/keep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			f := informers.NewSharedInformerFactory(client, 0)
			c := NewPVC(client, f.Core().V1().PersistentVolumeClaims(), f.Core().V1().Pods())
			controllertest.StartInformers(t, t.Context(), f)
			if err := c.sync(t.Context(), "default/"+tt.objects[0].(*v1.PersistentVolumeClaim).Name); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), tt.objects[0].(*v1.PersistentVolumeClaim).Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Finalizers, tt.want) {
				t.Errorf("finalizers = %v, want %v", got.Finalizers, tt.want)
			}
		})
	}
}

func TestPVProtection(t *testing.T) {
	vol := func(deleting bool, phase v1.PersistentVolumePhase, finalizers ...string) *v1.PersistentVolume {
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: finalizers}, Status: v1.PersistentVolumeStatus{Phase: phase}}
		if deleting {
			now := metav1.Now()
			pv.DeletionTimestamp = &now
		}
		return pv
	}
	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		want []string
	}{
		{"a new volume gets the finalizer", vol(false, v1.VolumeAvailable), []string{PVFinalizer}},
		{"a deleted bound volume keeps it", vol(true, v1.VolumeBound, PVFinalizer), []string{PVFinalizer}},
		{"a deleted released volume loses it", vol(true, v1.VolumeReleased, PVFinalizer), nil},
		{"a deleted available volume loses it", vol(true, v1.VolumeAvailable, PVFinalizer), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.pv)
			f := informers.NewSharedInformerFactory(client, 0)
			c := NewPV(client, f.Core().V1().PersistentVolumes())
			controllertest.StartInformers(t, t.Context(), f)
			if err := c.sync(t.Context(), "pv"); err != nil {
				t.Fatal(err)
			}
			got, _ := client.CoreV1().PersistentVolumes().Get(t.Context(), "pv", metav1.GetOptions{})
			if !slices.Equal(got.Finalizers, tt.want) {
				t.Errorf("finalizers = %v, want %v", got.Finalizers, tt.want)
			}
		})
	}
}

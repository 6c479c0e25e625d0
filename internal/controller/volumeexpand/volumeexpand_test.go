package volumeexpand

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/controller/util/controllertest"
)

func TestExpansionHandOff(t *testing.T) {
	yes, no := true, false
	claim := func(name, class, want, have string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: "pv-" + name,
				Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(want)}}},
			Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(have)}}}
	}
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		resizer string
		event   string
	}{
		{"grown, class allows", claim("a", "grow", "2Gi", "1Gi"), "example.com/grow", "Normal ExternalExpanding waiting for an external controller to expand this PVC"},
		{"grown, class refuses", claim("b", "fixed", "2Gi", "1Gi"), "",
			"Warning VolumeResizeFailed only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"},
		{"not grown", claim("c", "grow", "1Gi", "1Gi"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.claim,
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grow"}, Provisioner: "example.com/grow", AllowVolumeExpansion: &yes},
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, Provisioner: "example.com/fixed", AllowVolumeExpansion: &no})
			f := informers.NewSharedInformerFactory(client, 0)
			c := New(client, f.Core().V1().PersistentVolumeClaims(), f.Storage().V1().StorageClasses())
			rec := record.NewFakeRecorder(5)
			c.recorder = rec
			controllertest.StartInformers(t, t.Context(), f)
			if err := c.sync(t.Context(), "default/"+tt.claim.Name); err != nil {
				t.Fatal(err)
			}
			got, _ := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), tt.claim.Name, metav1.GetOptions{})
			if got.Annotations[AnnResizer] != tt.resizer {
				t.Errorf("resizer = %q, want %q", got.Annotations[AnnResizer], tt.resizer)
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if strings.Join(events, "\n") != tt.event {
				t.Errorf("events = %q, want %q", events, tt.event)
			}
		})
	}
}

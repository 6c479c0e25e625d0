package storage

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func TestResize(t *testing.T) {
	yes, no := true, false
	store := admissiontest.New(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grows"}, Provisioner: "p", AllowVolumeExpansion: &yes},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, Provisioner: "p", AllowVolumeExpansion: &no},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "unset"}, Provisioner: "p"},
	)
	p := NewResize(store)
	claim := func(class string, size string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if class != "" {
			c.Spec.StorageClassName = &class
		}
		return c
	}
	const (
		unbound = `persistentvolumeclaims "data" is forbidden: Only bound persistent volume claims can be expanded`
		refused = `persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`
	)
	tests := []struct {
		name     string
		old, new *corev1.PersistentVolumeClaim
		sub      string
		want     string
	}{
		{"grow, class allows", claim("grows", "1Gi", corev1.ClaimBound), claim("grows", "2Gi", corev1.ClaimBound), "", ""},
		{"grow pending", claim("grows", "1Gi", corev1.ClaimPending), claim("grows", "2Gi", corev1.ClaimPending), "", unbound},
		{"grow, class forbids", claim("fixed", "1Gi", corev1.ClaimBound), claim("fixed", "2Gi", corev1.ClaimBound), "", refused},
		{"grow, class silent", claim("unset", "1Gi", corev1.ClaimBound), claim("unset", "2Gi", corev1.ClaimBound), "", refused},
		{"grow, class missing", claim("gone", "1Gi", corev1.ClaimBound), claim("gone", "2Gi", corev1.ClaimBound), "", refused},
		{"grow, no class", claim("", "1Gi", corev1.ClaimBound), claim("", "2Gi", corev1.ClaimBound), "", refused},
		{"grow while changing class", claim("fixed", "1Gi", corev1.ClaimBound), claim("grows", "2Gi", corev1.ClaimBound), "", refused},
		{"same size, pending", claim("fixed", "1Gi", corev1.ClaimPending), claim("fixed", "1Gi", corev1.ClaimPending), "", ""},
		// Shrinking is validation's (never below status.capacity), not this plugin's.
		{"shrink", claim("fixed", "2Gi", corev1.ClaimBound), claim("fixed", "1Gi", corev1.ClaimBound), "", ""},
		{"status subresource", claim("fixed", "1Gi", corev1.ClaimBound), claim("fixed", "2Gi", corev1.ClaimBound), "status", ""},
	}
	for _, tt := range tests {
		a := &admission.Attributes{Operation: admission.Update, Resource: corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
			Subresource: tt.sub, Namespace: "ns", Name: "data", Object: tt.new, OldObject: tt.old}
		err := p.Validate(context.Background(), a)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	if p.Handles(admission.Create) || !p.Handles(admission.Update) {
		t.Errorf("Resize should handle updates only")
	}
}

package localpath

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	pv := func(name string, policy v1.PersistentVolumeReclaimPolicy) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: policy,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: filepath.Join(dir, DirName(name, "ns", "c"))}},
		}}
	}
	client := fake.NewClientset(pv("pvc-del", v1.PersistentVolumeReclaimDelete), pv("pvc-keep", v1.PersistentVolumeReclaimRetain))
	for _, name := range []string{"pvc-del", "pvc-keep", "pvc-unknown"} {
		if err := os.MkdirAll(filepath.Join(dir, DirName(name, "ns", "c")), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sweeper{Client: client, Dir: dir}
	s.Sweep(t.Context())
	for _, name := range []string{"pvc-del", "pvc-keep"} {
		if _, err := os.Stat(filepath.Join(dir, DirName(name, "ns", "c"))); err != nil {
			t.Errorf("%s removed while its volume exists: %v", name, err)
		}
	}
	// Both volumes are deleted from the API: only the Delete one's directory goes; a
	// directory never seen with a volume is left alone.
	for _, name := range []string{"pvc-del", "pvc-keep"} {
		if err := client.CoreV1().PersistentVolumes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Sweep(t.Context())
	if _, err := os.Stat(filepath.Join(dir, DirName("pvc-del", "ns", "c"))); !os.IsNotExist(err) {
		t.Errorf("pvc-del directory still there: %v", err)
	}
	for _, name := range []string{"pvc-keep", "pvc-unknown"} {
		if _, err := os.Stat(filepath.Join(dir, DirName(name, "ns", "c"))); err != nil {
			t.Errorf("%s removed: %v", name, err)
		}
	}
}

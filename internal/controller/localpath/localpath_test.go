package localpath

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/controller/util/controllertest"
	"mizzen/internal/localpath"
)

func setup(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, *record.FakeRecorder) {
	client := fake.NewClientset(append(objs, Class())...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes(), f.Storage().V1().StorageClasses(), f.Core().V1().Nodes())
	rec := record.NewFakeRecorder(10)
	c.recorder = rec
	controllertest.StartInformers(t, t.Context(), f)
	return c, client, rec
}

func node(name, dir string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelHostname: name}}}
	if dir != "" {
		n.Annotations = map[string]string{localpath.NodeDirAnnotation: dir}
	}
	return n
}

func claim(name, selectedNode string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	class := localpath.ClassName
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "u-" + "1",
			Annotations: map[string]string{annStorageProvisioner: localpath.Provisioner, annSelectedNode: selectedNode}},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: modes,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}}},
	}
}

func events(rec *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
			continue
		default:
		}
		return strings.Join(out, "\n")
	}
}

func TestProvisionsOnTheSelectedNode(t *testing.T) {
	c, client, rec := setup(t, node("n1", "/data/storage"), claim("data", "n1", v1.ReadWriteOnce))
	if err := c.syncClaim(t.Context(), "default/data"); err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-u-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no volume: %v; events: %s", err, events(rec))
	}
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/data/storage/pvc-u-1_default_data" {
		t.Errorf("source = %+v", pv.Spec.PersistentVolumeSource)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "n1" {
		t.Errorf("node affinity = %+v", terms)
	}
	q := pv.Spec.Capacity[v1.ResourceStorage]
	if q.String() != "2Gi" || pv.Spec.ClaimRef.UID != "u-1" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete ||
		pv.Spec.StorageClassName != localpath.ClassName || !localpath.IsLocalPath(pv) {
		t.Errorf("volume = %+v", pv)
	}
	if got := events(rec); !strings.Contains(got, "ProvisioningSucceeded Successfully provisioned volume pvc-u-1") {
		t.Errorf("events = %s", got)
	}
}

func TestRefusals(t *testing.T) {
	tests := []struct {
		name  string
		objs  []runtime.Object
		event string
	}{
		{"many writers", []runtime.Object{node("n1", "/d"), claim("data", "n1", v1.ReadWriteMany)},
			`Warning ProvisioningFailed failed to provision volume with StorageClass "local-path": access mode ReadWriteMany is not supported`},
		{"node without local-path storage", []runtime.Object{node("n1", ""), claim("data", "n1", v1.ReadWriteOnce)},
			`node "n1" offers no local-path storage`},
		{"no node selected", []runtime.Object{node("n1", "/d"), claim("data", "", v1.ReadWriteOnce)},
			"configuration error, no node was specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client, rec := setup(t, tt.objs...)
			if err := c.syncClaim(t.Context(), "default/data"); err != nil {
				t.Fatal(err)
			}
			if got := events(rec); !strings.Contains(got, tt.event) {
				t.Errorf("events = %q, want %q", got, tt.event)
			}
			if l, _ := client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
				t.Errorf("volumes provisioned: %d", len(l.Items))
			}
		})
	}
}

func TestDeletesReleasedVolumes(t *testing.T) {
	pv := func(name string, policy v1.PersistentVolumeReclaimPolicy, phase v1.PersistentVolumePhase) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: localpath.Provisioner}},
			Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy}, Status: v1.PersistentVolumeStatus{Phase: phase}}
	}
	c, client, _ := setup(t, pv("released", v1.PersistentVolumeReclaimDelete, v1.VolumeReleased),
		pv("kept", v1.PersistentVolumeReclaimRetain, v1.VolumeReleased), pv("bound", v1.PersistentVolumeReclaimDelete, v1.VolumeBound))
	for _, name := range []string{"released", "kept", "bound"} {
		if err := c.syncVolume(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	var left []string
	for _, pv := range l.Items {
		left = append(left, pv.Name)
	}
	if strings.Join(left, ",") != "bound,kept" {
		t.Errorf("volumes left = %v", left)
	}
}

func TestEnsureClassKeepsAnAdminsClass(t *testing.T) {
	client := fake.NewClientset()
	if err := EnsureClass(t.Context(), client); err != nil {
		t.Fatal(err)
	}
	sc, _ := client.StorageV1().StorageClasses().Get(t.Context(), "local-path", metav1.GetOptions{})
	if sc.Annotations[annDefaultClass] != "true" || *sc.VolumeBindingMode != "WaitForFirstConsumer" || *sc.ReclaimPolicy != "Delete" {
		t.Errorf("class = %+v", sc)
	}
	sc.Annotations[annDefaultClass] = "false"
	_, _ = client.StorageV1().StorageClasses().Update(t.Context(), sc, metav1.UpdateOptions{})
	if err := EnsureClass(t.Context(), client); err != nil {
		t.Fatal(err)
	}
	sc, _ = client.StorageV1().StorageClasses().Get(t.Context(), "local-path", metav1.GetOptions{})
	if sc.Annotations[annDefaultClass] != "false" {
		t.Error("the admin's change was overwritten")
	}
}

func TestResizeRecordsTheNewSize(t *testing.T) {
	pvc := claim("data", "n1", v1.ReadWriteOnce)
	pvc.Annotations[annResizer] = localpath.Provisioner
	pvc.Spec.VolumeName = "pvc-u-1"
	pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("5Gi")
	pvc.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
		Conditions: []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u-1", Annotations: map[string]string{annProvisionedBy: localpath.Provisioner}},
		Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}}}
	c, client, rec := setup(t, pvc, pv)
	if err := c.syncClaim(t.Context(), "default/data"); err != nil {
		t.Fatal(err)
	}
	gotPV, _ := client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-u-1", metav1.GetOptions{})
	gotPVC, _ := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data", metav1.GetOptions{})
	pvCap, pvcCap := gotPV.Spec.Capacity[v1.ResourceStorage], gotPVC.Status.Capacity[v1.ResourceStorage]
	if pvCap.String() != "5Gi" || pvcCap.String() != "5Gi" || len(gotPVC.Status.Conditions) != 0 {
		t.Errorf("pv capacity %s, claim capacity %s, conditions %v", pvCap.String(), pvcCap.String(), gotPVC.Status.Conditions)
	}
	if got := events(rec); !strings.Contains(got, "VolumeResizeSuccessful") {
		t.Errorf("events = %s", got)
	}
}

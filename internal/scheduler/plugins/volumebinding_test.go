package plugins

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/scheduler/framework"
)

func volumeBindingFor(t *testing.T, objs ...runtime.Object) (*VolumeBinding, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	h := &testHandle{factory: f, client: client}
	pl, err := NewVolumeBinding([]byte(`{"bindTimeoutSeconds": 10}`), h)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(t.Context().Done())
	f.WaitForCacheSync(t.Context().Done())
	return pl.(*VolumeBinding), client
}

func claimPod(volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "pod-uid"}, Spec: v1.PodSpec{Volumes: volumes}}
}

func pvcVolume(claim string) v1.Volume {
	return v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func testClaim(name, class, volume string) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "uid-" + "c"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: volume, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if volume != "" {
		pvc.Status.Phase = v1.ClaimBound
	}
	return pvc
}

func labelledNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func TestVolumeBindingPreFilter(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	local := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "mizzen.io/local-path", VolumeBindingMode: &wait}
	now := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, Provisioner: "example.com/x"}
	tests := []struct {
		name string
		pod  *v1.Pod
		objs []runtime.Object
		code framework.Code
		msg  string
	}{
		{"no claims", claimPod(), nil, framework.Skip, ""},
		{"missing claim", claimPod(pvcVolume("gone")), nil, framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "gone" not found`},
		{"ephemeral claim not made yet", claimPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}), nil,
			framework.UnschedulableAndUnresolvable, `waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"`},
		{"ephemeral claim of someone else", claimPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}),
			[]runtime.Object{testClaim("p-scratch", "local", "")},
			framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "p-scratch" was not created for the pod`},
		{"unbound immediate claim", claimPod(pvcVolume("c")), []runtime.Object{now, testClaim("c", "now", "")},
			framework.UnschedulableAndUnresolvable, ErrReasonUnboundImmediatePVC},
		{"delayed claim", claimPod(pvcVolume("c")), []runtime.Object{local, testClaim("c", "local", "")}, framework.Success, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, _ := volumeBindingFor(t, tt.objs...)
			_, st := pl.PreFilter(t.Context(), framework.NewCycleState(), tt.pod)
			if st.Code() != tt.code || (tt.msg != "" && st.Message() != tt.msg) {
				t.Errorf("status = %v %q, want %v %q", st.Code(), st.Message(), tt.code, tt.msg)
			}
		})
	}
}

func TestVolumeBindingFollowsBoundVolumes(t *testing.T) {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: v1.PersistentVolumeSpec{
		NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}}}
	pl, _ := volumeBindingFor(t, pv, testClaim("c", "", "pv"))
	state := framework.NewCycleState()
	pod := claimPod(pvcVolume("c"))
	if _, st := pl.PreFilter(t.Context(), state, pod); !st.IsSuccess() {
		t.Fatal(st)
	}
	for node, ok := range map[string]bool{"n1": true, "n2": false} {
		ni := framework.NewNodeInfo()
		ni.SetNode(labelledNode(node))
		st := pl.Filter(t.Context(), state, pod, ni)
		if st.IsSuccess() != ok || (!ok && st.Message() != ErrReasonNodeConflict) {
			t.Errorf("%s: %v", node, st)
		}
	}
}

// A WaitForFirstConsumer claim with no volume is provisioned where the pod goes: PreBind
// names the node on the claim and waits for the claim to be bound.
func TestVolumeBindingSelectsTheNode(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	local := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "mizzen.io/local-path", VolumeBindingMode: &wait}
	pl, client := volumeBindingFor(t, local, testClaim("c", "local", ""))
	state := framework.NewCycleState()
	pod := claimPod(pvcVolume("c"))
	if _, st := pl.PreFilter(t.Context(), state, pod); !st.IsSuccess() {
		t.Fatal(st)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(labelledNode("n1"))
	if st := pl.Filter(t.Context(), state, pod, ni); !st.IsSuccess() {
		t.Fatal(st)
	}
	pl.Reserve(t.Context(), state, pod, "n1")
	done := make(chan *framework.Status, 1)
	go func() { done <- pl.PreBind(t.Context(), state, pod, "n1") }()
	// Play the binder: once the claim names its node, bind it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Annotations[AnnSelectedNode] == "n1" {
			pvc.Spec.VolumeName, pvc.Status.Phase = "pvc-c", v1.ClaimBound
			if _, err := client.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := <-done; !st.IsSuccess() {
		t.Errorf("PreBind: %v", st)
	}
}

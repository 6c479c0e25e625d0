package fieldmanager_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/registry/catalog"
)

// updateCase is a write a kubelet or controller makes again and again: live is the
// stored object (created through Create, so it carries the creator's managedFields),
// change makes the next version of it.
type updateCase struct {
	name        string
	gvk         schema.GroupVersionKind
	subresource string
	manager     string
	live        func() k8sruntime.Object
	change      func(k8sruntime.Object)
}

// defaultedAs defaults obj as its resource's strategy does.
func defaultedAs(gvk schema.GroupVersionKind, obj k8sruntime.Object) k8sruntime.Object {
	for _, r := range catalog.All() {
		if r.GroupVersionKind() == gvk && r.Strategy != nil {
			r.Strategy.Default(obj)
		}
	}
	return obj
}

var (
	nodeGVK  = corev1.SchemeGroupVersion.WithKind("Node")
	leaseGVK = coordinationv1.SchemeGroupVersion.WithKind("Lease")
)

func runningPod() k8sruntime.Object {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "bench", "tier": "backend"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	defaultedAs(podGVK, pod)
	t0 := metav1.Unix(1700000000, 0)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodPending, HostIP: "10.0.0.1", PodIP: "10.1.0.5", StartTime: &t0,
		HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}}, PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}},
		QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: t0, Reason: "ContainersNotReady"},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: t0, Reason: "ContainersNotReady"},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "registry.example/app:1.0", ImageID: "sha256:abc",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}},
	}
	return pod
}

func node() k8sruntime.Object {
	t0 := metav1.Unix(1700000000, 0)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "containerd://2.0"},
		},
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		st := corev1.ConditionFalse
		if c == corev1.NodeReady {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: st, LastHeartbeatTime: t0, LastTransitionTime: t0, Reason: "KubeletReady", Message: "kubelet is posting ready status"})
	}
	return defaultedAs(nodeGVK, n)
}

func deployment() k8sruntime.Object {
	replicas := int32(3)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
	defaultedAs(deploymentGVK, d)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"},
		}}
	return d
}

func lease() k8sruntime.Object {
	holder, dur := "kube-scheduler-1", int32(15)
	now := metav1.NewMicroTime(time.Unix(1700000000, 0))
	return defaultedAs(leaseGVK, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
	})
}

// updateCases are the writes step 1 of the fast path measures.
var updateCases = []updateCase{
	{"PodStatus", podGVK, "status", "kubelet", runningPod, func(o k8sruntime.Object) {
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions[1].Status = corev1.ConditionTrue
		p.Status.Conditions[1].Reason = ""
		p.Status.ContainerStatuses[0].Ready = true
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(1700000005, 0)}}
	}},
	{"LeaseRenew", leaseGVK, "", "kube-scheduler", lease, func(o k8sruntime.Object) {
		l := o.(*coordinationv1.Lease)
		now := metav1.NewMicroTime(time.Unix(1700000010, 0))
		l.Spec.RenewTime = &now
	}},
	{"NodeHeartbeat", nodeGVK, "status", "kubelet", node, func(o k8sruntime.Object) {
		n := o.(*corev1.Node)
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.Unix(1700000040, 0)
		}
	}},
	{"DeploymentStatus", deploymentGVK, "status", "kube-controller-manager", deployment, func(o k8sruntime.Object) {
		d := o.(*appsv1.Deployment)
		d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 3, 3, 0
		d.Status.Conditions[0].Status, d.Status.Conditions[0].Reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
	}},
	{"DeploymentScale", deploymentGVK, "", "kubectl-edit", deployment, func(o k8sruntime.Object) {
		d := o.(*appsv1.Deployment)
		r := int32(5)
		d.Spec.Replicas = &r
	}},
}

// storedLive is c's live object as the store holds it after its create (by "creator")
// and one earlier write of the case's kind by its manager.
func storedLive(m *fieldmanager.Managers, c updateCase) k8sruntime.Object {
	empty := c.live().DeepCopyObject()
	emptyOf(empty)
	obj := c.live()
	live := m.Create(c.gvk, empty, obj, "creator")
	meta := live.(metav1.Object)
	meta.SetUID("u")
	meta.SetResourceVersion("1")
	meta.SetCreationTimestamp(metav1.Unix(1700000000, 0))
	return live
}

// emptyOf clears obj to the zero value of its type, keeping it typed.
func emptyOf(obj k8sruntime.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		*o = corev1.Pod{}
	case *corev1.Node:
		*o = corev1.Node{}
	case *coordinationv1.Lease:
		*o = coordinationv1.Lease{}
	case *appsv1.Deployment:
		*o = appsv1.Deployment{}
	}
}

// BenchmarkTrackUpdate measures Managers.Update for each of updateCases, with the
// library's validation of typed values (library) and with the package's (fast).
func BenchmarkTrackUpdate(b *testing.B) {
	for _, c := range updateCases {
		b.Run(c.name+"/library", func(b *testing.B) { benchUpdate(b, c, true) })
		b.Run(c.name+"/fast", func(b *testing.B) { benchUpdate(b, c, false) })
	}
}

func benchUpdate(b *testing.B, c updateCase, libraryValidation bool) {
	m := newManagers(b)
	if libraryValidation {
		m.LibraryOnly()
	}
	live := storedLive(m, c)
	next := live.DeepCopyObject()
	c.change(next)
	m.Update(c.gvk, c.subresource, live, next.DeepCopyObject(), c.manager)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Update(c.gvk, c.subresource, live, next.DeepCopyObject(), c.manager)
	}
}

package framework

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeInfoCountsHostPortsAndClaims adds and removes pods with and without host
// ports and claims: the node's used ports and claim counts follow them, and each
// PodInfo carries its pod's priority.
func TestNodeInfoCountsHostPortsAndClaims(t *testing.T) {
	prio := int32(7)
	withPort := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "1"}, Spec: v1.PodSpec{
		Priority:   &prio,
		Containers: []v1.Container{{Name: "a", Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 8080, HostPort: 8080, Protocol: v1.ProtocolTCP}}}},
	}}
	withClaim := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "2"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "a"}},
		Volumes:    []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "3"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	if pi := NewPodInfo(withPort); pi.Priority != 7 || pi.UID != "1" || !pi.hostPorts || pi.pvcs {
		t.Errorf("PodInfo of a pod with priority 7 and a host port: %+v", pi)
	}
	if pi := NewPodInfo(withClaim); pi.Priority != 0 || pi.hostPorts || !pi.pvcs {
		t.Errorf("PodInfo of a pod with a claim: %+v", pi)
	}
	n := NewNodeInfo()
	n.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	for _, p := range []*v1.Pod{withPort, withClaim, plain} {
		n.AddPodInfo(NewPodInfo(p))
	}
	if !n.UsedPorts.CheckConflict("", "TCP", 8080) || n.UsedPorts.CheckConflict("", "TCP", 80) {
		t.Errorf("used ports %v, want 8080/TCP only", n.UsedPorts)
	}
	if n.PVCRefCounts["ns/data"] != 1 {
		t.Errorf("claim counts %v", n.PVCRefCounts)
	}
	n.RemovePod(withPort)
	n.RemovePod(withClaim)
	if len(n.UsedPorts) != 0 && n.UsedPorts.CheckConflict("", "TCP", 8080) {
		t.Errorf("used ports after removal %v", n.UsedPorts)
	}
	if len(n.PVCRefCounts) != 0 {
		t.Errorf("claim counts after removal %v", n.PVCRefCounts)
	}
}

package podtopologylabels

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func TestAdmit(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		corev1.LabelTopologyZone: "z1", corev1.LabelTopologyRegion: "r1", corev1.LabelHostname: "n1", "topology.kubernetes.io/rack": "a"}}}
	unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	p := New(admissiontest.New(node, unlabelled))
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	// Every pod starts with a zone label of its own, which the node's overwrites.
	both := map[string]string{"app": "x", corev1.LabelTopologyZone: "z1", corev1.LabelTopologyRegion: "r1"}
	unchanged := map[string]string{"app": "x", corev1.LabelTopologyZone: "mine"}
	for _, tc := range []struct {
		name        string
		op          admission.Operation
		subresource string
		nodeName    string
		want        map[string]string
	}{
		{"a pod created on a node", admission.Create, "", "n1", both},
		{"a pod bound to a node", admission.Update, "binding", "n1", both},
		{"a pod created unscheduled", admission.Create, "", "", unchanged},
		{"a plain update of a bound pod", admission.Update, "", "n1", unchanged},
		{"a status write", admission.Update, "status", "n1", unchanged},
		{"a node without topology labels", admission.Create, "", "n2", unchanged},
		{"a node not known", admission.Update, "binding", "gone", unchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", Labels: maps.Clone(unchanged)}, Spec: corev1.PodSpec{NodeName: tc.nodeName}}
			a := &admission.Attributes{Operation: tc.op, Resource: pods, Subresource: tc.subresource, Namespace: "d", Name: "p", Object: pod}
			if !p.Handles(tc.op) {
				t.Fatalf("the plugin does not handle %s", tc.op)
			}
			if err := p.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(pod.Labels, tc.want) {
				t.Errorf("labels %v, want %v", pod.Labels, tc.want)
			}
		})
	}
}

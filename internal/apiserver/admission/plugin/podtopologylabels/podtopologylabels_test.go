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
		binding     bool // the object is the pod's Binding to nodeName, not the pod
		nodeName    string
		want        map[string]string
	}{
		{"a pod created on a node", admission.Create, "", false, "n1", both},
		{"a pod's Binding to a node", admission.Create, "binding", true, "n1", both},
		{"a pod created unscheduled", admission.Create, "", false, "", unchanged},
		{"a plain update of a bound pod", admission.Update, "", false, "n1", unchanged},
		{"a status write", admission.Update, "status", false, "n1", unchanged},
		{"a node without topology labels", admission.Create, "", false, "n2", unchanged},
		{"a Binding to a node not known", admission.Create, "binding", true, "gone", unchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "p", Namespace: "d", Labels: maps.Clone(unchanged)}
			a := &admission.Attributes{Operation: tc.op, Resource: pods, Subresource: tc.subresource, Namespace: "d", Name: "p"}
			if tc.binding {
				a.Object = &corev1.Binding{ObjectMeta: meta, Target: corev1.ObjectReference{Kind: "Node", Name: tc.nodeName}}
			} else {
				a.Object = &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: tc.nodeName}}
			}
			// The chain calls a plugin only for the operations it handles.
			if p.Handles(tc.op) {
				if err := p.Admit(context.Background(), a); err != nil {
					t.Fatal(err)
				}
			}
			var got map[string]string
			switch obj := a.Object.(type) {
			case *corev1.Pod:
				got = obj.Labels
			case *corev1.Binding:
				got = obj.Labels
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

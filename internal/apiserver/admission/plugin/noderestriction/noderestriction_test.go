package noderestriction

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/registry"
)

type pods map[string]*corev1.Pod

func (p pods) Get(_ context.Context, _ schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	if pod, ok := p[ns+"/"+name]; ok {
		return pod, nil
	}
	return nil, errors.New("not found")
}

func (p pods) List(context.Context, schema.GroupVersionResource, string) ([]runtime.Object, error) {
	return nil, nil
}

func TestAdmit(t *testing.T) {
	onA := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "a"}}
	plugin := New(pods{"ns/p": onA})
	kubelet := func(n string) registry.User {
		return registry.User{Name: "system:node:" + n, Groups: []string{"system:nodes", "system:authenticated"}}
	}
	node := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	mirror := func(nodeName string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Annotations: map[string]string{mirrorAnnotation: "x"}},
			Spec: corev1.PodSpec{NodeName: nodeName}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	nodesR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	leasesR := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	cases := []struct {
		name string
		a    admission.Attributes
		want string // "" allowed, else part of the message
	}{
		{"own node create", admission.Attributes{Operation: admission.Create, Resource: nodesR, Name: "a", Object: node("a", map[string]string{"kubernetes.io/hostname": "a"})}, ""},
		{"other node update", admission.Attributes{Operation: admission.Update, Resource: nodesR, Name: "b", Object: node("b", nil), OldObject: node("b", nil)}, `node "a" is not allowed to modify node "b"`},
		{"restricted label", admission.Attributes{Operation: admission.Update, Resource: nodesR, Name: "a",
			Object: node("a", map[string]string{"node-restriction.kubernetes.io/trusted": "yes"}), OldObject: node("a", nil)}, "is not allowed to modify labels: node-restriction.kubernetes.io/trusted"},
		{"kubernetes.io label", admission.Attributes{Operation: admission.Create, Resource: nodesR, Name: "a",
			Object: node("a", map[string]string{"node-role.kubernetes.io/control-plane": ""})}, "is not allowed to set the following labels"},
		{"own label", admission.Attributes{Operation: admission.Update, Resource: nodesR, Name: "a",
			Object: node("a", map[string]string{"example.com/x": "y", "node.kubernetes.io/exclude-from-external-load-balancers": ""}), OldObject: node("a", nil)}, ""},
		{"taints", admission.Attributes{Operation: admission.Update, Resource: nodesR, Name: "a",
			Object: node("a", nil), OldObject: node("a", nil, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule})}, "is not allowed to modify taints"},
		{"other lease", admission.Attributes{Operation: admission.Update, Resource: leasesR, Namespace: "kube-node-lease", Name: "b"}, "can only access node lease with the same name"},
		{"own lease", admission.Attributes{Operation: admission.Update, Resource: leasesR, Namespace: "kube-node-lease", Name: "a"}, ""},
		{"mirror pod", admission.Attributes{Operation: admission.Create, Resource: podsR, Namespace: "ns", Object: mirror("a", nil)}, ""},
		{"not a mirror pod", admission.Attributes{Operation: admission.Create, Resource: podsR, Namespace: "ns",
			Object: mirror("a", func(p *corev1.Pod) { p.Annotations = nil })}, "can only create mirror pods"},
		{"mirror pod for another node", admission.Attributes{Operation: admission.Create, Resource: podsR, Namespace: "ns", Object: mirror("b", nil)}, "spec.nodeName set to itself"},
		{"mirror pod with a secret", admission.Attributes{Operation: admission.Create, Resource: podsR, Namespace: "ns", Object: mirror("a", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
		})}, "can not create pods that reference secrets"},
		{"own pod status", admission.Attributes{Operation: admission.Update, Resource: podsR, Subresource: "status", Namespace: "ns", Name: "p", OldObject: onA}, ""},
		{"delete own pod", admission.Attributes{Operation: admission.Delete, Resource: podsR, Namespace: "ns", Name: "p"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.User = kubelet("a")
			err := plugin.Admit(context.Background(), &a)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want 403 saying %q", err, tc.want)
			}
		})
	}
	// Node b may not touch node a's pod; users other than kubelets are not restricted.
	a := admission.Attributes{Operation: admission.Update, Resource: podsR, Subresource: "status", Namespace: "ns", Name: "p", OldObject: onA, User: kubelet("b")}
	if err := plugin.Admit(context.Background(), &a); err == nil || !strings.Contains(err.Error(), `node "b" can only update pod status for pods with spec.nodeName set to itself`) {
		t.Errorf("node b updating a's pod status: %v", err)
	}
	a = admission.Attributes{Operation: admission.Update, Resource: nodesR, Name: "b", Object: node("b", nil), OldObject: node("b", nil), User: registry.User{Name: "admin", Groups: []string{"system:masters"}}}
	if err := plugin.Admit(context.Background(), &a); err != nil {
		t.Errorf("admin: %v", err)
	}
}

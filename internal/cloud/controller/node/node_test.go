package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/fake"
)

func taintedNode(name string, annotations map[string]string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule},
			{Key: cloud.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule},
		}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, {Type: v1.NodeHostName, Address: name}}},
	}
}

func newController(t *testing.T, p *fake.Provider, objs ...runtime.Object) (*Controller, *k8sfake.Clientset, *record.FakeRecorder) {
	t.Helper()
	client := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, p, factory.Core().V1().Nodes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(10)
	c.Events = events
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return c, client, events
}

func TestInitializesTaintedNode(t *testing.T) {
	p := &fake.Provider{Metadata: map[string]*cloud.InstanceMetadata{"n1": {
		ProviderID: "local://n1", InstanceType: "small", Zone: "z1", Region: "r1",
		NodeAddresses:    []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "203.0.113.1"}, {Type: v1.NodeInternalIP, Address: "192.0.2.1"}},
		AdditionalLabels: map[string]string{"example.com/rack": "a", "kubernetes.io/forbidden": "x"},
	}}}
	c, client, events := newController(t, p, taintedNode("n1", map[string]string{cloud.AnnotationProvidedNodeIP: "192.0.2.1"}))
	if err := c.Sync(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if n.Spec.ProviderID != "local://n1" {
		t.Errorf("providerID %q", n.Spec.ProviderID)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want only the uninitialized one removed", n.Spec.Taints)
	}
	for k, want := range map[string]string{
		v1.LabelTopologyZone: "z1", v1.LabelTopologyRegion: "r1", v1.LabelInstanceTypeStable: "small",
		labelBetaZone: "z1", labelBetaRegion: "r1", labelBetaInstanceType: "small", "example.com/rack": "a",
	} {
		if n.Labels[k] != want {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], want)
		}
	}
	if _, ok := n.Labels["kubernetes.io/forbidden"]; ok {
		t.Error("an extra label in the kubernetes.io namespace was set")
	}
	// The provided node IP first, then the other types, then the kubelet's hostname.
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, {Type: v1.NodeExternalIP, Address: "203.0.113.1"}, {Type: v1.NodeHostName, Address: "n1"}}
	if !slices.Equal(n.Status.Addresses, want) {
		t.Errorf("addresses %v, want %v", n.Status.Addresses, want)
	}
	if e := <-events.Events; e != "Normal Synced Node synced successfully" {
		t.Errorf("event %q", e)
	}
}

func TestProvidedNodeIPUnknownToProviderKeepsTheTaint(t *testing.T) {
	p := &fake.Provider{Metadata: map[string]*cloud.InstanceMetadata{"n1": {
		ProviderID: "local://n1", NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.9"}},
	}}}
	c, client, events := newController(t, p, taintedNode("n1", map[string]string{cloud.AnnotationProvidedNodeIP: "192.0.2.1"}))
	err := c.Sync(context.Background(), "n1")
	if err == nil || !strings.Contains(err.Error(), "failed to get node address from cloud provider that matches ip: 192.0.2.1") {
		t.Fatalf("Sync: %v", err)
	}
	n, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if !cloudTaint(n) {
		t.Error("the taint was removed from a node the provider could not initialize")
	}
	if e := <-events.Events; !strings.HasPrefix(e, "Warning FailedToInitializeNode ") {
		t.Errorf("event %q", e)
	}
}

func TestProviderErrorRetries(t *testing.T) {
	p := &fake.Provider{MetadataErr: errors.New("boom")}
	c, _, _ := newController(t, p, taintedNode("n1", nil))
	if err := c.Sync(context.Background(), "n1"); err == nil {
		t.Fatal("Sync succeeded, want an error to retry on")
	}
}

func TestInitializedNodeOnlyReconcilesLabels(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{labelBetaZone: "z2", v1.LabelTopologyZone: "z1"}}}
	p := &fake.Provider{}
	c, client, _ := newController(t, p, n)
	if err := c.Sync(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if got.Labels[v1.LabelTopologyZone] != "z2" {
		t.Errorf("GA zone label %q, want the beta one's z2", got.Labels[v1.LabelTopologyZone])
	}
	if len(p.CallsSnapshot()) != 0 {
		t.Errorf("the provider was asked %v about an initialized node", p.CallsSnapshot())
	}
}

package nodeipam

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func node(name, podCIDR string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	return n
}

// assigned returns node -> podCIDR for every patch the controller sent.
func assigned(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range client.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok {
			continue
		}
		var body struct {
			Spec struct {
				PodCIDR  string   `json:"podCIDR"`
				PodCIDRs []string `json:"podCIDRs"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(body.Spec.PodCIDRs, []string{body.Spec.PodCIDR}) {
			t.Errorf("patch for %s: podCIDRs %v disagree with podCIDR %s", p.GetName(), body.Spec.PodCIDRs, body.Spec.PodCIDR)
		}
		out[p.GetName()] = body.Spec.PodCIDR
	}
	return out
}

func TestAssignPodCIDRs(t *testing.T) {
	tests := []struct {
		story       string
		clusterCIDR string
		maskSize    int
		observed    []*corev1.Node
		sync        []string
		deleted     []string // removed from the informer before the sync
		want        map[string]string
		wantErr     bool
		wantEvents  []string
	}{
		{
			story: "two new nodes get the first two subnets", clusterCIDR: "10.244.0.0/16", maskSize: 24,
			observed: []*corev1.Node{node("a", ""), node("b", "")}, sync: []string{"a", "b"},
			want: map[string]string{"a": "10.244.0.0/24", "b": "10.244.1.0/24"},
		},
		{
			story: "after a restart, subnets held by nodes are not handed out again", clusterCIDR: "10.244.0.0/16", maskSize: 24,
			observed: []*corev1.Node{node("a", "10.244.0.0/24"), node("b", "10.244.2.0/24"), node("c", ""), node("d", "")},
			sync:     []string{"a", "b", "c", "d"},
			want:     map[string]string{"c": "10.244.1.0/24", "d": "10.244.3.0/24"},
		},
		{
			story: "a deleted node's subnet becomes free once the others are used", clusterCIDR: "10.0.0.0/23", maskSize: 24,
			observed: []*corev1.Node{node("a", "10.0.0.0/24"), node("b", "10.0.1.0/24"), node("c", "")},
			deleted:  []string{"a"}, sync: []string{"a", "c"},
			want: map[string]string{"c": "10.0.0.0/24"},
		},
		{
			story: "a full range is an error and nothing is written", clusterCIDR: "10.0.0.0/24", maskSize: 24,
			observed: []*corev1.Node{node("a", "10.0.0.0/24"), node("b", "")}, sync: []string{"b"},
			want: map[string]string{}, wantErr: true,
			wantEvents: []string{"Normal CIDRNotAvailable Node b status is now: CIDRNotAvailable"},
		},
		{
			story: "IPv6 works the same way", clusterCIDR: "fd00:10::/56", maskSize: 64,
			observed: []*corev1.Node{node("a", ""), node("b", "")}, sync: []string{"a", "b"},
			want: map[string]string{"a": "fd00:10::/64", "b": "fd00:10:0:1::/64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tt.observed {
				objs = append(objs, n)
			}
			client := fake.NewClientset(objs...)
			inf := informers.NewSharedInformerFactory(client, 0)
			c, err := New(client, inf.Core().V1().Nodes(), tt.clusterCIDR, tt.maskSize)
			if err != nil {
				t.Fatal(err)
			}
			events := record.NewFakeRecorder(10)
			c.recorder = events
			idx := inf.Core().V1().Nodes().Informer().GetIndexer()
			for _, n := range tt.observed {
				idx.Add(n)
			}
			if err := c.rebuild(); err != nil {
				t.Fatal(err)
			}
			for _, name := range tt.deleted {
				obj, _, _ := idx.GetByKey(name)
				idx.Delete(obj)
			}
			var gotErr error
			for _, name := range tt.sync {
				if err := c.sync(context.Background(), name); err != nil {
					gotErr = err
				}
			}
			if (gotErr != nil) != tt.wantErr {
				t.Fatalf("sync error %v, want error %v", gotErr, tt.wantErr)
			}
			got := assigned(t, client)
			if len(got) != len(tt.want) {
				t.Fatalf("assigned %v, want %v", got, tt.want)
			}
			for n, cidr := range tt.want {
				if got[n] != cidr {
					t.Errorf("node %s got %q, want %q", n, got[n], cidr)
				}
			}
			var gotEvents []string
			for len(events.Events) > 0 {
				gotEvents = append(gotEvents, <-events.Events)
			}
			if !slices.Equal(gotEvents, tt.wantEvents) {
				t.Errorf("events %q, want %q", gotEvents, tt.wantEvents)
			}
		})
	}
}

func TestBadConfiguration(t *testing.T) {
	for _, tt := range []struct {
		cidr string
		mask int
	}{{"nonsense", 24}, {"10.0.0.0/16", 8}, {"10.0.0.0/16", 33}} {
		if _, err := newAllocator(tt.cidr, tt.mask); err == nil {
			t.Errorf("cluster CIDR %s with mask %d accepted", tt.cidr, tt.mask)
		}
	}
}

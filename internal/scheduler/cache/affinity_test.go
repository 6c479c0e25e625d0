package cache

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/scheduler/affinityindex"
)

func zoneNode(name, zone string) *v1.Node {
	n := mkNode(name)
	n.Labels = map[string]string{v1.LabelHostname: name}
	if zone != "" {
		n.Labels[v1.LabelTopologyZone] = zone
	}
	return n
}

// termPod is a pod labelled app=app in ns with the given (anti-)affinity.
func termPod(name, ns, node, app string, affinity *v1.Affinity) *v1.Pod {
	p := mkPod(name, node, 100)
	p.Namespace = ns
	p.Labels = map[string]string{"app": app}
	p.Spec.Affinity = affinity
	return p
}

func term(key, app string, namespaces ...string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{TopologyKey: key, Namespaces: namespaces,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func antiOn(key, app string, namespaces ...string) *v1.Affinity {
	return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(key, app, namespaces...)}}}
}

func relabel(p *v1.Pod, app string) *v1.Pod {
	q := p.DeepCopy()
	q.Labels = map[string]string{"app": app}
	q.ResourceVersion = "2"
	return q
}

// TestAffinityIndexFollowsTheCache checks after every change that the snapshot's
// affinity index, kept up to date from the nodes each refresh replaces, holds what an
// index built from scratch over the refreshed snapshot holds.
func TestAffinityIndexFollowsTheCache(t *testing.T) {
	web0 := termPod("web-0", "a", "n1", "web", antiOn(v1.LabelHostname, "web", "a", "b"))
	web1 := termPod("web-1", "b", "n2", "web", antiOn(v1.LabelHostname, "web", "a", "b"))
	web2 := termPod("web-2", "a", "n3", "web", antiOn(v1.LabelHostname, "web", "a", "b"))
	db := termPod("db-0", "a", "n2", "db", antiOn(v1.LabelTopologyZone, "db"))
	cache0 := termPod("cache-0", "a", "n1", "cache", nil)
	front := termPod("front-0", "a", "n3", "front", &v1.Affinity{
		PodAffinity: &v1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  []v1.PodAffinityTerm{term(v1.LabelTopologyZone, "cache"), term(v1.LabelHostname, "cache")},
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: term(v1.LabelHostname, "web")}},
		},
		PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 3, PodAffinityTerm: term(v1.LabelTopologyZone, "db")}}},
	})
	plain := termPod("plain", "a", "n1", "web", nil)
	tests := []struct {
		name  string
		steps []func(c *Cache) error
	}{
		{name: "pods come and go", steps: []func(c *Cache) error{
			func(c *Cache) error { c.AddPod(web0); return nil },
			func(c *Cache) error { c.AddPod(web1); return nil },
			func(c *Cache) error { c.AddPod(plain); return nil },
			func(c *Cache) error { c.AddPod(db); return nil },
			func(c *Cache) error { c.RemovePod(web0); return nil },
			func(c *Cache) error { c.RemovePod(web1); return nil },
			func(c *Cache) error { c.RemovePod(db); c.RemovePod(plain); return nil },
		}},
		{name: "assume, forget, assume again, confirm", steps: []func(c *Cache) error{
			func(c *Cache) error { c.AddPod(web0); return nil },
			func(c *Cache) error { return c.AssumePod(web2) },
			func(c *Cache) error { return c.ForgetPod(web2) },
			func(c *Cache) error { return c.AssumePod(web2) },
			func(c *Cache) error { c.AddPod(web2); return nil },
		}},
		{name: "confirmed on another node than assumed", steps: []func(c *Cache) error{
			func(c *Cache) error { return c.AssumePod(web2) },
			func(c *Cache) error {
				moved := web2.DeepCopy()
				moved.Spec.NodeName = "n1"
				c.AddPod(moved)
				return nil
			},
		}},
		{name: "labels change: the pod leaves one group and joins another", steps: []func(c *Cache) error{
			func(c *Cache) error { c.AddPod(web0); c.AddPod(plain); return nil },
			func(c *Cache) error { c.UpdatePod(plain, relabel(plain, "db")); return nil },
			func(c *Cache) error { c.UpdatePod(web0, relabel(web0, "cache")); return nil },
		}},
		{name: "affinity groups and preferred terms", steps: []func(c *Cache) error{
			func(c *Cache) error { c.AddPod(cache0); c.AddPod(web0); return nil },
			func(c *Cache) error { c.AddPod(front); return nil },
			func(c *Cache) error { c.AddPod(db); return nil },
			func(c *Cache) error { c.RemovePod(cache0); return nil },
			func(c *Cache) error { c.RemovePod(front); return nil },
		}},
		{name: "node relabelled, removed and back", steps: []func(c *Cache) error{
			func(c *Cache) error { c.AddPod(web0); c.AddPod(db); c.AddPod(web1); return nil },
			func(c *Cache) error { c.UpdateNode(nil, zoneNode("n2", "c")); return nil },
			func(c *Cache) error { c.UpdateNode(nil, zoneNode("n2", "")); return nil },
			func(c *Cache) error { c.RemoveNode(zoneNode("n2", "")); return nil },
			func(c *Cache) error { c.AddNode(zoneNode("n2", "a")); return nil },
			func(c *Cache) error { c.RemovePod(db); return nil },
		}},
		{name: "several changes between refreshes", steps: []func(c *Cache) error{
			func(c *Cache) error {
				c.AddPod(web0)
				c.AddPod(cache0)
				if err := c.AssumePod(web2); err != nil {
					return err
				}
				c.RemovePod(web0)
				c.AddPod(front)
				return c.ForgetPod(web2)
			},
			func(c *Cache) error { c.AddPod(web0); c.RemovePod(cache0); c.RemovePod(front); return nil },
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			c.AddNode(zoneNode("n1", "a"))
			c.AddNode(zoneNode("n2", "b"))
			c.AddNode(zoneNode("n3", "b"))
			c.AddNode(zoneNode("n4", ""))
			snap := NewEmptySnapshot()
			c.UpdateSnapshot(snap)
			for i, step := range tt.steps {
				if err := step(c); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				c.UpdateSnapshot(snap)
				got, want := snap.AffinityIndex().String(), affinityindex.Build(snap.List()).String()
				if got != want {
					t.Fatalf("step %d: incremental index\n%s\nfrom scratch\n%s", i, got, want)
				}
			}
		})
	}
}

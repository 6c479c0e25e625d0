package resourcequota

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func quota(hard map[string]string, mutate ...func(*corev1.ResourceQuota)) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
	for k, v := range hard {
		q.Spec.Hard[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	for _, m := range mutate {
		m(q)
	}
	return q
}

func resources(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	set := func(l corev1.ResourceList, name corev1.ResourceName, v string) {
		if v != "" {
			l[name] = resource.MustParse(v)
		}
	}
	set(r.Requests, corev1.ResourceCPU, reqCPU)
	set(r.Requests, corev1.ResourceMemory, reqMem)
	set(r.Limits, corev1.ResourceCPU, limCPU)
	set(r.Limits, corev1.ResourceMemory, limMem)
	return r
}

func pod(name string, phase corev1.PodPhase, containers ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for i, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Resources: r})
	}
	return p
}

func withInit(p *corev1.Pod, sidecar bool, r corev1.ResourceRequirements) *corev1.Pod {
	c := corev1.Container{Name: "init", Resources: r}
	if sidecar {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	disc := client.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"list"}}}}}
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, &metav1.PartialObjectMetadata{})
	deploy := func(ns, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, deploy("team", "web"), deploy("team", "api"), deploy("other", "x"))
	f := informers.NewSharedInformerFactory(client, 0)
	core := f.Core().V1()
	c := New(client, meta, disc, Informers{Quotas: core.ResourceQuotas(), Pods: core.Pods(), Services: core.Services(),
		ConfigMaps: core.ConfigMaps(), Secrets: core.Secrets(), PVCs: core.PersistentVolumeClaims()})
	c.now = func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	for _, o := range objs {
		switch o.(type) {
		case *corev1.ResourceQuota:
			core.ResourceQuotas().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			core.Pods().Informer().GetIndexer().Add(o)
		case *corev1.Service:
			core.Services().Informer().GetIndexer().Add(o)
		case *corev1.ConfigMap:
			core.ConfigMaps().Informer().GetIndexer().Add(o)
		case *corev1.Secret:
			core.Secrets().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			core.PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		}
	}
	client.ClearActions()
	return c, client
}

func TestQuotaUsage(t *testing.T) {
	deadline := int64(60)
	tests := []struct {
		story    string
		quota    *corev1.ResourceQuota
		observed []runtime.Object
		want     map[string]string // status.used; nil: no write expected
	}{
		{
			story: "pods and their requests and limits are summed; finished pods do not count",
			quota: quota(map[string]string{"pods": "10", "requests.cpu": "4", "requests.memory": "4Gi", "limits.cpu": "8", "limits.memory": "8Gi", "cpu": "4"}),
			observed: []runtime.Object{
				pod("a", corev1.PodRunning, resources("250m", "64Mi", "500m", "128Mi"), resources("250m", "64Mi", "1", "128Mi")),
				pod("b", corev1.PodPending, resources("100m", "", "", "")),
				pod("done", corev1.PodSucceeded, resources("2", "1Gi", "2", "1Gi")),
				pod("failed", corev1.PodFailed, resources("2", "1Gi", "2", "1Gi")),
			},
			want: map[string]string{"pods": "2", "requests.cpu": "600m", "requests.memory": "128Mi", "limits.cpu": "1500m", "limits.memory": "256Mi", "cpu": "600m"},
		},
		{
			story: "an init container heavier than the app sets the pod's request; sidecars add up",
			quota: quota(map[string]string{"requests.cpu": "4"}),
			observed: []runtime.Object{
				withInit(pod("big-init", corev1.PodRunning, resources("100m", "", "", "")), false, resources("1", "", "", "")),
				withInit(pod("sidecar", corev1.PodRunning, resources("100m", "", "", "")), true, resources("200m", "", "", "")),
			},
			want: map[string]string{"requests.cpu": "1300m"},
		},
		{
			story: "object counts, including count/<resource>.<group> of any API type",
			quota: quota(map[string]string{"services": "5", "configmaps": "5", "count/secrets": "5", "persistentvolumeclaims": "5",
				"requests.storage": "10Gi", "count/deployments.apps": "3", "services.loadbalancers": "1"}),
			observed: []runtime.Object{
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "db"}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "settings"}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "token"}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}}}},
			},
			want: map[string]string{"services": "2", "configmaps": "1", "count/secrets": "1", "persistentvolumeclaims": "1",
				"requests.storage": "5Gi", "count/deployments.apps": "2", "services.loadbalancers": "1"},
		},
		{
			story: "a BestEffort quota counts only pods without requests or limits",
			quota: quota(map[string]string{"pods": "5"}, func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
			}),
			observed: []runtime.Object{pod("guaranteed", corev1.PodRunning, resources("1", "1Gi", "1", "1Gi")),
				pod("besteffort", corev1.PodRunning, corev1.ResourceRequirements{})},
			want: map[string]string{"pods": "1"},
		},
		{
			story: "a Terminating quota counts only pods with an active deadline",
			quota: quota(map[string]string{"pods": "5"}, func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
			}),
			observed: []runtime.Object{pod("service", corev1.PodRunning), func() *corev1.Pod {
				p := pod("batch", corev1.PodRunning)
				p.Spec.ActiveDeadlineSeconds = &deadline
				return p
			}()},
			want: map[string]string{"pods": "1"},
		},
		{
			story: "a priority class scope selector picks pods by class",
			quota: quota(map[string]string{"pods": "5"}, func(q *corev1.ResourceQuota) {
				q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
			}),
			observed: []runtime.Object{pod("low", corev1.PodRunning), func() *corev1.Pod {
				p := pod("high", corev1.PodRunning)
				p.Spec.PriorityClassName = "high"
				return p
			}()},
			want: map[string]string{"pods": "1"},
		},
		{
			story: "a status already correct is not rewritten",
			quota: quota(map[string]string{"pods": "5"}, func(q *corev1.ResourceQuota) {
				q.Status.Hard = corev1.ResourceList{"pods": resource.MustParse("5")}
				q.Status.Used = corev1.ResourceList{"pods": resource.MustParse("1")}
			}),
			observed: []runtime.Object{pod("a", corev1.PodRunning)},
			want:     nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			c, client := newController(t, append([]runtime.Object{tt.quota}, tt.observed...)...)
			if err := c.sync(context.Background(), "team/compute"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var actions []clienttesting.Action
			for _, a := range client.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" { // discovery reads are not writes
					actions = append(actions, a)
				}
			}
			if tt.want == nil {
				if len(actions) != 0 {
					t.Fatalf("wrote %v, want nothing", actions)
				}
				return
			}
			if len(actions) != 1 || actions[0].GetSubresource() != "status" {
				t.Fatalf("actions %v, want one status update", actions)
			}
			got := actions[0].(clienttesting.UpdateAction).GetObject().(*corev1.ResourceQuota)
			if len(got.Status.Hard) != len(tt.quota.Spec.Hard) {
				t.Errorf("status.hard %v, want spec.hard %v", got.Status.Hard, tt.quota.Spec.Hard)
			}
			if len(got.Status.Used) != len(tt.want) {
				t.Errorf("status.used %v, want %v", got.Status.Used, tt.want)
			}
			for name, want := range tt.want {
				q := got.Status.Used[corev1.ResourceName(name)]
				if q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("used %s = %s, want %s", name, q.String(), want)
				}
			}
		})
	}
}

// TestReplenishment: a change to an object counted through the metadata client (a
// ReplicaSet) recounts the quotas of its namespace, and a new quota recounts its
// neighbours (their resourcequotas count), without waiting for the resync.
func TestReplenishment(t *testing.T) {
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	core := f.Core().V1()
	c := New(client, nil, nil, Informers{Quotas: core.ResourceQuotas(), Pods: core.Pods(), Services: core.Services(),
		ConfigMaps: core.ConfigMaps(), Secrets: core.Secrets(), PVCs: core.PersistentVolumeClaims(),
		Replenish: []cache.SharedIndexInformer{f.Apps().V1().ReplicaSets().Informer()}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	// next returns the next key queued, waiting at most a bound (a hang, not a timing check).
	next := func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			key, _ := c.queue.Get()
			c.queue.Done(key)
			c.queue.Forget(key)
			got <- key
		}()
		select {
		case key := <-got:
			return key
		case <-time.After(30 * time.Second):
			t.Fatal("nothing queued")
			return ""
		}
	}
	if _, err := client.CoreV1().ResourceQuotas("team").Create(ctx, quota(map[string]string{"count/replicasets.apps": "5"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := next(); key != "team/compute" {
		t.Fatalf("after the quota's creation queued %q", key)
	}
	// quiet: once an informer has seen a change (seen), nothing was queued for it.
	quiet := func(what string, seen func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !seen(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never seen by the informer", what)
			}
		}
		if n := c.queue.Len(); n != 0 {
			t.Fatalf("%s queued %d recounts, want none", what, n)
		}
	}
	// A creation queues nothing (admission charged it); a deletion releases usage.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
	if _, err := client.AppsV1().ReplicaSets("team").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rsInformer := f.Apps().V1().ReplicaSets().Informer()
	quiet("a ReplicaSet's creation", func() bool { _, ok, _ := rsInformer.GetStore().GetByKey("team/web"); return ok })
	if err := client.AppsV1().ReplicaSets("team").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := next(); key != "team/compute" || c.queue.Len() != 0 {
		t.Fatalf("after a ReplicaSet's creation and deletion queued %q and %d more, want one recount", key, c.queue.Len())
	}
	// A quota's status write (admission's charge) queues nothing; its spec does.
	q, err := client.CoreV1().ResourceQuotas("team").Get(ctx, "compute", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Used = corev1.ResourceList{"count/replicasets.apps": resource.MustParse("1")}
	if q, err = client.CoreV1().ResourceQuotas("team").UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	quiet("a quota's status write", func() bool {
		cached, err := core.ResourceQuotas().Lister().ResourceQuotas("team").Get("compute")
		return err == nil && cached.ResourceVersion == q.ResourceVersion
	})
	q.Spec.Hard["count/replicasets.apps"] = resource.MustParse("6")
	if _, err := client.CoreV1().ResourceQuotas("team").Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := next(); key != "team/compute" || c.queue.Len() != 0 {
		t.Fatalf("after a status write and a spec change queued %q and %d more, want one recount", key, c.queue.Len())
	}
	// A pod that finishes stops counting: replenished. Its creation was not.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job"}}
	if pod, err = client.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quiet("a pod's creation", func() bool { _, err := core.Pods().Lister().Pods("team").Get("job"); return err == nil })
	pod.Status.Phase = corev1.PodSucceeded
	if _, err := client.CoreV1().Pods("team").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := next(); key != "team/compute" || c.queue.Len() != 0 {
		t.Fatalf("after a pod's creation and completion queued %q and %d more, want one recount", key, c.queue.Len())
	}
	second := quota(map[string]string{"resourcequotas": "2"}, func(q *corev1.ResourceQuota) { q.Name = "objects" })
	if _, err := client.CoreV1().ResourceQuotas("team").Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	queued := map[string]bool{next(): true, next(): true}
	if !queued["team/compute"] || !queued["team/objects"] {
		t.Errorf("after a second quota queued %v, want both quotas", queued)
	}
}

// Which pod updates make the controller recount, as upstream's update filter: a pod that
// stops counting, changes scope, or is resized in place; not a label change.
func TestPodUpdatesThatReleaseUsage(t *testing.T) {
	now := time.Now()
	running := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	relabelled := running.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	finished := running.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	deadline := int64(60)
	withDeadline := running.DeepCopy()
	withDeadline.Spec.ActiveDeadlineSeconds = &deadline
	resized := running.DeepCopy()
	resized.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	for name, c := range map[string]struct {
		cur  *corev1.Pod
		want bool
	}{
		"label": {relabelled, false}, "finished": {finished, true}, "active deadline": {withDeadline, true}, "resized": {resized, true},
	} {
		if got := releasesUsage(running, c.cur, now); got != c.want {
			t.Errorf("%s: releasesUsage %v, want %v", name, got, c.want)
		}
	}
}

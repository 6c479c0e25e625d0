package statefulset

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/util/controllertest"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func newSet(replicas int32, image string) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "uid-db", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "db-headless",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: image}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
	}
}

type world struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
	events *record.FakeRecorder
}

func newWorld(t *testing.T, objs ...runtime.Object) *world {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	controllertest.GenerateNames(client)
	f := informers.NewSharedInformerFactory(client, 0)
	w := &world{t: t, ctx: ctx, client: client, f: f, c: New(client, f, clocktesting.NewFakeClock(t0)), events: record.NewFakeRecorder(1000)}
	w.c.recorder = w.events
	controllertest.StartInformers(t, ctx, f)
	return w
}

func (w *world) pods() []*corev1.Pod {
	list, _ := w.client.CoreV1().Pods("default").List(w.ctx, metav1.ListOptions{})
	var out []*corev1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return ordinalOf(w.set(), a) - ordinalOf(w.set(), b) })
	return out
}

func (w *world) podNames() []string {
	var out []string
	for _, p := range w.pods() {
		out = append(out, p.Name)
	}
	return out
}

func (w *world) set() *appsv1.StatefulSet {
	s, err := w.client.AppsV1().StatefulSets("default").Get(w.ctx, "db", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func (w *world) sync() {
	w.t.Helper()
	list := func(f func() []any) func() []any { return f }
	controllertest.WaitForCache(w.t, w.f.Core().V1().Pods().Informer().GetStore(), list(func() []any {
		var out []any
		for _, p := range w.pods() {
			out = append(out, p)
		}
		return out
	}))
	controllertest.WaitForCache(w.t, w.f.Core().V1().PersistentVolumeClaims().Informer().GetStore(), func() []any {
		l, _ := w.client.CoreV1().PersistentVolumeClaims("default").List(w.ctx, metav1.ListOptions{})
		var out []any
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return out
	})
	controllertest.WaitForCache(w.t, w.f.Apps().V1().StatefulSets().Informer().GetStore(), func() []any { return []any{w.set()} })
	controllertest.WaitForCache(w.t, w.f.Apps().V1().ControllerRevisions().Informer().GetStore(), func() []any {
		l, _ := w.client.AppsV1().ControllerRevisions("default").List(w.ctx, metav1.ListOptions{})
		var out []any
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return out
	})
	if err := w.c.Sync(w.ctx, "default/db"); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

// kubelet makes every pod Running and Ready.
func (w *world) kubelet() {
	for _, p := range w.pods() {
		if util.IsPodReady(p) {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
		if _, err := w.client.CoreV1().Pods("default").UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) scale(n int32) {
	s := w.set()
	s.Spec.Replicas = &n
	if _, err := w.client.AppsV1().StatefulSets("default").Update(w.ctx, s, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func TestOrderedReadyCreatesOneAtATime(t *testing.T) {
	w := newWorld(t, newSet(3, "db:1"))
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0"}) {
		t.Fatalf("pods %v, want only db-0", got)
	}
	p := w.pods()[0]
	if p.Labels[PodNameLabel] != "db-0" || p.Labels[PodIndexLabel] != "0" || p.Spec.Hostname != "db-0" ||
		p.Spec.Subdomain != "db-headless" || !util.IsControlledBy(p, w.set()) {
		t.Errorf("pod identity: labels %v hostname %q subdomain %q", p.Labels, p.Spec.Hostname, p.Spec.Subdomain)
	}
	if v := p.Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "data-db-0" {
		t.Errorf("volumes %+v, want claim data-db-0", v)
	}
	if _, err := w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, "data-db-0", metav1.GetOptions{}); err != nil {
		t.Errorf("claim data-db-0: %v", err)
	}
	for _, want := range []string{
		"Normal SuccessfulCreate create Claim data-db-0 Pod db-0 in StatefulSet db success",
		"Normal SuccessfulCreate create Pod db-0 in StatefulSet db successful",
	} {
		if got := <-w.events.Events; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	w.sync()
	if got := w.podNames(); len(got) != 1 {
		t.Fatalf("pods %v: db-1 started before db-0 was ready", got)
	}
	for want := 2; want <= 3; want++ {
		w.kubelet()
		w.sync()
		if got := len(w.pods()); got != want {
			t.Fatalf("%d pods after the previous became ready, want %d", got, want)
		}
	}
	w.kubelet()
	w.sync()
	st := w.set().Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.CurrentReplicas != 3 ||
		st.UpdatedReplicas != 3 || st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision {
		t.Errorf("status %+v", st)
	}
}

func TestParallelCreatesAllAtOnce(t *testing.T) {
	s := newSet(3, "db:1")
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	w := newWorld(t, s)
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0", "db-1", "db-2"}) {
		t.Errorf("pods %v, want all three", got)
	}
}

func TestScaleDownFromTheHighestOrdinal(t *testing.T) {
	w := newWorld(t, newSet(3, "db:1"))
	for range 4 {
		w.sync()
		w.kubelet()
	}
	w.scale(1)
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0", "db-1"}) {
		t.Fatalf("pods %v, want db-2 removed first", got)
	}
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0"}) {
		t.Fatalf("pods %v, want db-1 removed next", got)
	}
	claims, _ := w.client.CoreV1().PersistentVolumeClaims("default").List(w.ctx, metav1.ListOptions{})
	if len(claims.Items) != 3 {
		t.Errorf("%d claims, want all 3 retained by default", len(claims.Items))
	}
}

// TestScaleDownHaltsOnUnhealthyPods is upstream's "Scaling should happen in predictable
// order and halt if any stateful pod is unhealthy": scaled to 0 with every pod unready,
// an OrderedReady set removes none, since its highest pod is not the first unhealthy one.
func TestScaleDownHaltsOnUnhealthyPods(t *testing.T) {
	w := newWorld(t, newSet(3, "db:1"))
	for range 4 {
		w.sync()
		w.kubelet()
	}
	for _, p := range w.pods() {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}}
		if _, err := w.client.CoreV1().Pods("default").UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.scale(0)
	w.sync()
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0", "db-1", "db-2"}) {
		t.Fatalf("pods %v, want all three kept while they are unready", got)
	}
	w.kubelet()
	w.sync()
	if got := w.podNames(); !slices.Equal(got, []string{"db-0", "db-1"}) {
		t.Fatalf("pods %v, want db-2 removed first once they are ready", got)
	}
}

func TestRollingUpdateWithPartition(t *testing.T) {
	s := newSet(3, "db:1")
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(1))}
	w := newWorld(t, s)
	for range 4 {
		w.sync()
		w.kubelet()
	}
	s = w.set()
	s.Spec.Template.Spec.Containers[0].Image = "db:2"
	if _, err := w.client.AppsV1().StatefulSets("default").Update(w.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for range 8 {
		before := map[string]string{}
		for _, p := range w.pods() {
			before[p.Name] = p.Spec.Containers[0].Image
		}
		w.sync()
		for name := range before {
			if !slices.Contains(w.podNames(), name) {
				order = append(order, name)
			}
		}
		if n := 3 - len(w.pods()); n > 1 {
			t.Fatalf("%d pods down at once", n)
		}
		w.sync() // recreate
		w.kubelet()
	}
	if !slices.Equal(order, []string{"db-2", "db-1"}) {
		t.Errorf("replaced %v, want db-2 then db-1 (partition 1 keeps db-0)", order)
	}
	images := map[string]string{}
	for _, p := range w.pods() {
		images[p.Name] = p.Spec.Containers[0].Image
	}
	if images["db-0"] != "db:1" || images["db-1"] != "db:2" || images["db-2"] != "db:2" {
		t.Errorf("images %v", images)
	}
	st := w.set().Status
	if st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 || st.CurrentRevision == st.UpdateRevision {
		t.Errorf("status %+v, want 2 updated, 1 current, revisions differing", st)
	}
	// Recreating db-0 below the partition keeps the current revision.
	if err := w.client.CoreV1().Pods("default").Delete(w.ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	if p, _ := w.client.CoreV1().Pods("default").Get(w.ctx, "db-0", metav1.GetOptions{}); p.Spec.Containers[0].Image != "db:1" {
		t.Errorf("db-0 recreated with %s, want db:1 below the partition", p.Spec.Containers[0].Image)
	}
}

func TestOnDeleteWaitsForTheUser(t *testing.T) {
	s := newSet(2, "db:1")
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	w := newWorld(t, s)
	for range 3 {
		w.sync()
		w.kubelet()
	}
	s = w.set()
	s.Spec.Template.Spec.Containers[0].Image = "db:2"
	if _, err := w.client.AppsV1().StatefulSets("default").Update(w.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	w.sync()
	for _, p := range w.pods() {
		if p.Spec.Containers[0].Image != "db:1" {
			t.Fatalf("OnDelete replaced %s by itself", p.Name)
		}
	}
	if err := w.client.CoreV1().Pods("default").Delete(w.ctx, "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	if p, _ := w.client.CoreV1().Pods("default").Get(w.ctx, "db-1", metav1.GetOptions{}); p.Spec.Containers[0].Image != "db:2" {
		t.Errorf("recreated db-1 runs %s, want db:2", p.Spec.Containers[0].Image)
	}
}

func TestClaimRetentionPolicy(t *testing.T) {
	s := newSet(2, "db:1")
	s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	w := newWorld(t, s)
	for range 3 {
		w.sync()
		w.kubelet()
	}
	claim, _ := w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, "data-db-1", metav1.GetOptions{})
	if refs := claim.OwnerReferences; len(refs) != 1 || refs[0].Kind != "StatefulSet" || refs[0].UID != "uid-db" {
		t.Fatalf("claim owners %+v, want the set (whenDeleted: Delete)", refs)
	}
	doomed, _ := w.client.CoreV1().Pods("default").Get(w.ctx, "db-1", metav1.GetOptions{})
	w.scale(1)
	w.sync()
	claim, _ = w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, "data-db-1", metav1.GetOptions{})
	var kinds []string
	for _, r := range claim.OwnerReferences {
		kinds = append(kinds, r.Kind+"/"+string(r.UID))
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"Pod/" + string(doomed.UID), "StatefulSet/uid-db"}) {
		t.Errorf("claim owners %v, want the condemned pod added (whenScaled: Delete)", kinds)
	}
	// Scaling back up drops the reference to the gone pod, so the claim is reused.
	w.scale(2)
	w.sync()
	claim, _ = w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, "data-db-1", metav1.GetOptions{})
	if len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].Kind != "StatefulSet" {
		t.Errorf("claim owners %+v after scaling up, want only the set", claim.OwnerReferences)
	}
}

// TestClaimRetentionPolicyRetain: by default (Retain, Retain) claims have no owners, so
// neither deleting the set nor scaling down removes them; changing the policy later
// changes the owners of existing claims.
func TestClaimRetentionPolicyRetain(t *testing.T) {
	s := newSet(2, "db:1")
	w := newWorld(t, s)
	for range 3 {
		w.sync()
		w.kubelet()
	}
	w.scale(1)
	w.sync()
	for _, name := range []string{"data-db-0", "data-db-1"} {
		claim, err := w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(claim.OwnerReferences) != 0 {
			t.Errorf("%s owners %+v, want none (Retain)", name, claim.OwnerReferences)
		}
	}
	set := w.set()
	set.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	if _, err := w.client.AppsV1().StatefulSets("default").Update(w.ctx, set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	claim, _ := w.client.CoreV1().PersistentVolumeClaims("default").Get(w.ctx, "data-db-0", metav1.GetOptions{})
	if refs := claim.OwnerReferences; len(refs) != 1 || refs[0].Kind != "StatefulSet" {
		t.Errorf("data-db-0 owners %+v after whenDeleted became Delete, want the set", refs)
	}
}

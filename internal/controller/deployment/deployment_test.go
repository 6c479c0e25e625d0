package deployment

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

func newDeployment(replicas int32, image string, surge, unavailable int) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(image),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromInt32(int32(surge))), MaxUnavailable: ptr(intstr.FromInt32(int32(unavailable)))}},
			RevisionHistoryLimit:    ptr(int32(10)),
			ProgressDeadlineSeconds: ptr(int32(600)),
		},
	}
}

// replicaSetFor builds the ReplicaSet the controller would have made for d's template
// with image, at revision rev, with replicas pods all available.
func replicaSetFor(d *appsv1.Deployment, image string, rev int, replicas int32, age time.Duration) *appsv1.ReplicaSet {
	tpl := template(image)
	hash := util.ComputeHash(&tpl, nil)
	tpl.Labels[util.DefaultHashLabelKey] = hash
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-" + hash, Namespace: "default", UID: types.UID("uid-rs-" + image),
			Labels:            tpl.Labels,
			CreationTimestamp: metav1.NewTime(t0.Add(-age)),
			OwnerReferences:   []metav1.OwnerReference{*util.NewControllerRef(d, deploymentGVK)},
			Annotations: map[string]string{RevisionAnnotation: fmt.Sprint(rev),
				DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas), MaxReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas + 1)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", util.DefaultHashLabelKey: hash}},
			Template: tpl},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

// cluster is a fake apiserver plus hand-fed informer caches: observe() shows the
// controller what the apiserver holds, kubelet() plays the ReplicaSet controller and
// the kubelets by making every wanted pod exist and become available.
type cluster struct {
	t      *testing.T
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

func newCluster(t *testing.T, objs ...runtime.Object) *cluster {
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(t0)
	cl := &cluster{t: t, client: client, f: f, c: New(client, f, clk), clock: clk, events: record.NewFakeRecorder(1000)}
	cl.c.recorder = cl.events
	cl.observe()
	return cl
}

func (cl *cluster) replicaSets() []*appsv1.ReplicaSet {
	list, err := cl.client.AppsV1().ReplicaSets("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	slices.SortFunc(out, func(a, b *appsv1.ReplicaSet) int { return int(revision(a) - revision(b)) })
	return out
}

func (cl *cluster) deployment() *appsv1.Deployment {
	d, err := cl.client.AppsV1().Deployments("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	return d
}

func (cl *cluster) observe() {
	ctx := context.Background()
	ds, _ := cl.client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	rss, _ := cl.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	pods, _ := cl.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	var d, r, p []any
	for i := range ds.Items {
		d = append(d, &ds.Items[i])
	}
	for i := range rss.Items {
		r = append(r, &rss.Items[i])
	}
	for i := range pods.Items {
		p = append(p, &pods.Items[i])
	}
	cl.f.Apps().V1().Deployments().Informer().GetIndexer().Replace(d, "")
	cl.f.Apps().V1().ReplicaSets().Informer().GetIndexer().Replace(r, "")
	cl.f.Core().V1().Pods().Informer().GetIndexer().Replace(p, "")
}

func (cl *cluster) sync() {
	cl.t.Helper()
	cl.observe()
	cl.client.ClearActions()
	if err := cl.c.Sync(context.Background(), "default/web"); err != nil {
		cl.t.Fatalf("sync: %v", err)
	}
}

// kubelet makes every ReplicaSet's pods exist and be available.
func (cl *cluster) kubelet() {
	for _, rs := range cl.replicaSets() {
		n := specReplicas(rs)
		rs.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: rs.Generation}
		if _, err := cl.client.AppsV1().ReplicaSets("default").UpdateStatus(context.Background(), rs, metav1.UpdateOptions{}); err != nil {
			cl.t.Fatal(err)
		}
	}
}

func (cl *cluster) writes(verb, resource string) int {
	n := 0
	for _, a := range cl.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// deploymentUpdates counts the last sync's updates of the deployment itself and of its
// status subresource.
func (cl *cluster) deploymentUpdates() (main, status int) {
	for _, a := range cl.client.Actions() {
		if a.GetVerb() != "update" || a.GetResource().Resource != "deployments" {
			continue
		}
		if a.GetSubresource() == "status" {
			status++
		} else {
			main++
		}
	}
	return main, status
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) appsv1.DeploymentCondition {
	if c := getCondition(&d.Status, t); c != nil {
		return *c
	}
	return appsv1.DeploymentCondition{}
}

// rollOut syncs and plays the kubelet until the deployment reports completion, checking
// the rolling-update bounds after every step: never more than replicas+maxSurge pods
// wanted, never fewer than replicas-maxUnavailable available.
func (cl *cluster) rollOut(maxTotal, minAvailable int32) {
	cl.t.Helper()
	for step := 0; step < 40; step++ {
		before := map[string]int32{}
		for _, rs := range cl.replicaSets() {
			before[rs.Name] = rs.Status.AvailableReplicas
		}
		cl.sync()
		var total, available int32
		for _, rs := range cl.replicaSets() {
			total += specReplicas(rs)
			// Scale-downs take pods away at once; new pods are not available yet.
			available += min(before[rs.Name], specReplicas(rs))
		}
		if total > maxTotal {
			cl.t.Fatalf("step %d: %d pods wanted, above replicas+maxSurge=%d", step, total, maxTotal)
		}
		if available < minAvailable {
			cl.t.Fatalf("step %d: %d pods available, below replicas-maxUnavailable=%d", step, available, minAvailable)
		}
		d := cl.deployment()
		if d.Status.ObservedGeneration >= d.Generation && deploymentComplete(d, &d.Status) && len(activeReplicaSets(cl.replicaSets())) == 1 &&
			condition(d, appsv1.DeploymentProgressing).Reason == ReasonNewRSAvailable {
			return
		}
		cl.kubelet()
	}
	cl.t.Fatalf("rollout did not complete: %+v", cl.deployment().Status)
}

func TestNewDeploymentCreatesItsFirstReplicaSet(t *testing.T) {
	d := newDeployment(3, "nginx:1", 1, 0)
	cl := newCluster(t, d)
	cl.sync()
	rss := cl.replicaSets()
	if len(rss) != 1 {
		t.Fatalf("%d replica sets, want 1", len(rss))
	}
	rs := rss[0]
	tpl := template("nginx:1")
	hash := util.ComputeHash(&tpl, nil)
	if rs.Name != "web-"+hash || rs.Labels[util.DefaultHashLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels[util.DefaultHashLabelKey] != hash || rs.Spec.Template.Labels[util.DefaultHashLabelKey] != hash {
		t.Errorf("replica set %s labels %v selector %v: want name and labels with hash %s", rs.Name, rs.Labels, rs.Spec.Selector, hash)
	}
	if !util.IsControlledBy(rs, d) || rs.Annotations[RevisionAnnotation] != "1" || specReplicas(rs) != 3 {
		t.Errorf("replica set: owner %v revision %q replicas %d", rs.OwnerReferences, rs.Annotations[RevisionAnnotation], specReplicas(rs))
	}
	got := cl.deployment()
	if got.Annotations[RevisionAnnotation] != "1" {
		t.Errorf("deployment revision %q, want 1", got.Annotations[RevisionAnnotation])
	}
	// The revision is stored with the sync's one status write, through the status
	// subresource as upstream's controller stores it, not by an update of its own.
	if main, status := cl.deploymentUpdates(); main != 0 || status != 1 {
		t.Errorf("first sync: %d updates of the deployment and %d of its status, want 0 and 1", main, status)
	}
	if c := condition(got, appsv1.DeploymentProgressing); c.Reason != ReasonNewRSCreated {
		t.Errorf("Progressing = %+v, want NewReplicaSetCreated", c)
	}
	if c := condition(got, appsv1.DeploymentAvailable); c.Status != corev1.ConditionFalse {
		t.Errorf("Available = %+v, want False with no pods", c)
	}
	cl.kubelet()
	cl.sync()
	got = cl.deployment()
	want := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	if got.Status.Replicas != want.Replicas || got.Status.UpdatedReplicas != 3 || got.Status.AvailableReplicas != 3 ||
		got.Status.ReadyReplicas != 3 || got.Status.UnavailableReplicas != 0 || got.Status.ObservedGeneration != 1 {
		t.Errorf("status %+v, want counts %+v", got.Status, want)
	}
	if c := condition(got, appsv1.DeploymentAvailable); c.Status != corev1.ConditionTrue || c.Reason != ReasonMinimumAvailable {
		t.Errorf("Available = %+v", c)
	}
	if c := condition(got, appsv1.DeploymentProgressing); c.Reason != ReasonNewRSAvailable ||
		c.Message != fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name) {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestRollingUpdateStaysWithinBounds(t *testing.T) {
	for _, tt := range []struct {
		replicas           int32
		surge, unavailable int
	}{
		{10, 3, 2},
		{10, 0, 1},
		{10, 1, 0},
		{5, 5, 5},
		{3, 1, 1},
	} {
		t.Run(fmt.Sprintf("replicas=%d surge=%d unavailable=%d", tt.replicas, tt.surge, tt.unavailable), func(t *testing.T) {
			d := newDeployment(tt.replicas, "nginx:2", tt.surge, tt.unavailable)
			d.Generation = 2
			d.Annotations = map[string]string{RevisionAnnotation: "1"}
			old := replicaSetFor(d, "nginx:1", 1, tt.replicas, time.Hour)
			cl := newCluster(t, d, old)
			cl.rollOut(tt.replicas+int32(tt.surge), tt.replicas-int32(tt.unavailable))

			rss := cl.replicaSets()
			if len(rss) != 2 || specReplicas(rss[0]) != 0 || specReplicas(rss[1]) != tt.replicas {
				t.Fatalf("after rollout: %v", describe(rss))
			}
			if rss[1].Annotations[RevisionAnnotation] != "2" || cl.deployment().Annotations[RevisionAnnotation] != "2" {
				t.Errorf("new revision %q, deployment revision %q; want 2", rss[1].Annotations[RevisionAnnotation], cl.deployment().Annotations[RevisionAnnotation])
			}
		})
	}
}

func describe(rss []*appsv1.ReplicaSet) string {
	s := ""
	for _, rs := range rss {
		s += fmt.Sprintf("%s(rev %s, %d/%d) ", rs.Name, rs.Annotations[RevisionAnnotation], rs.Status.AvailableReplicas, specReplicas(rs))
	}
	return s
}

func TestRollbackReusesTheOldReplicaSet(t *testing.T) {
	// Revision 2 runs nginx:2; `kubectl rollout undo` put nginx:1 back in the template.
	d := newDeployment(4, "nginx:1", 1, 1)
	d.Generation = 3
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	rev1 := replicaSetFor(d, "nginx:1", 1, 0, 2*time.Hour)
	rev2 := replicaSetFor(d, "nginx:2", 2, 4, time.Hour)
	cl := newCluster(t, d, rev1, rev2)
	cl.sync()
	if n := cl.writes("create", "replicasets"); n != 0 {
		t.Fatalf("rollback created %d replica sets, want the old one reused", n)
	}
	reused, err := cl.client.AppsV1().ReplicaSets("default").Get(context.Background(), rev1.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reused.Annotations[RevisionAnnotation] != "3" || reused.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Errorf("reused replica set annotations %v, want revision 3 and history 1", reused.Annotations)
	}
	if cl.deployment().Annotations[RevisionAnnotation] != "3" {
		t.Errorf("deployment revision %q, want 3", cl.deployment().Annotations[RevisionAnnotation])
	}
	cl.kubelet()
	cl.rollOut(5, 3)
	rss := cl.replicaSets()
	if rss[len(rss)-1].Name != rev1.Name || specReplicas(rss[len(rss)-1]) != 4 {
		t.Errorf("after rollback: %s", describe(rss))
	}
}

func TestRecreateStopsOldPodsFirst(t *testing.T) {
	d := newDeployment(3, "nginx:2", 0, 0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	old := replicaSetFor(d, "nginx:1", 1, 3, time.Hour)
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-old-1", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(old, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cl := newCluster(t, d, old, running)

	cl.sync()
	if rss := cl.replicaSets(); len(rss) != 1 || specReplicas(rss[0]) != 0 {
		t.Fatalf("first sync: %s, want only the old set, scaled to 0", describe(rss))
	}
	cl.kubelet() // the old set reports 0 pods, but one is still terminating
	cl.sync()
	if n := cl.writes("create", "replicasets"); n != 0 {
		t.Fatalf("created the new replica set while an old pod still runs")
	}
	if err := cl.client.CoreV1().Pods("default").Delete(context.Background(), running.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.sync()
	rss := cl.replicaSets()
	if len(rss) != 2 || specReplicas(rss[1]) != 3 {
		t.Fatalf("after old pods are gone: %s, want the new set at 3", describe(rss))
	}
}

func TestScalingDuringRolloutIsProportional(t *testing.T) {
	d := newDeployment(15, "nginx:2", 3, 2)
	d.Status.Replicas = 13
	old := replicaSetFor(d, "nginx:1", 1, 8, time.Hour)
	newer := replicaSetFor(d, "nginx:2", 2, 5, time.Minute)
	for _, rs := range []*appsv1.ReplicaSet{old, newer} {
		rs.Annotations[DesiredReplicasAnnotation] = "10"
		rs.Annotations[MaxReplicasAnnotation] = "13"
		rs.Status.AvailableReplicas = 0
	}
	cl := newCluster(t, d, old, newer)
	cl.sync()
	rss := cl.replicaSets()
	for _, want := range []string{
		fmt.Sprintf("Normal ScalingReplicaSet Scaled up replica set %s from 8 to 11", old.Name),
		fmt.Sprintf("Normal ScalingReplicaSet Scaled up replica set %s from 5 to 7", newer.Name),
	} {
		if got := <-cl.events.Events; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	if specReplicas(rss[0]) != 11 || specReplicas(rss[1]) != 7 {
		t.Errorf("scaled 8+5 for 10 replicas to %s; want 11+7 for 15 replicas (18 with surge)", describe(rss))
	}
	for _, rs := range rss {
		if rs.Annotations[DesiredReplicasAnnotation] != "15" || rs.Annotations[MaxReplicasAnnotation] != "18" {
			t.Errorf("%s annotations %v, want desired 15 max 18", rs.Name, rs.Annotations)
		}
	}
}

func TestProgressDeadline(t *testing.T) {
	d := newDeployment(2, "nginx:2", 1, 0)
	d.Spec.ProgressDeadlineSeconds = ptr(int32(60))
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
	rs := replicaSetFor(d, "nginx:2", 1, 2, time.Hour)
	rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0
	stale := metav1.NewTime(t0.Add(-2 * time.Minute))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, UnavailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
			Reason: ReasonReplicaSetUpdated, LastUpdateTime: stale, LastTransitionTime: stale}}}
	cl := newCluster(t, d, rs)
	cl.sync()
	c := condition(cl.deployment(), appsv1.DeploymentProgressing)
	if c.Status != corev1.ConditionFalse || c.Reason != ReasonTimedOut ||
		c.Message != fmt.Sprintf("ReplicaSet %q has timed out progressing.", rs.Name) {
		t.Errorf("Progressing = %+v, want False/ProgressDeadlineExceeded", c)
	}
}

func TestPausedDeploymentDoesNotRollOut(t *testing.T) {
	d := newDeployment(2, "nginx:2", 1, 0)
	d.Spec.Paused = true
	old := replicaSetFor(d, "nginx:1", 1, 2, time.Hour)
	cl := newCluster(t, d, old)
	cl.sync()
	if n := cl.writes("create", "replicasets"); n != 0 {
		t.Errorf("paused deployment created %d replica sets", n)
	}
	if c := condition(cl.deployment(), appsv1.DeploymentProgressing); c.Reason != ReasonPaused || c.Status != corev1.ConditionUnknown {
		t.Errorf("Progressing = %+v, want Unknown/DeploymentPaused", c)
	}
	// Resume: the rollout starts.
	resumed := cl.deployment()
	resumed.Spec.Paused = false
	if _, err := cl.client.AppsV1().Deployments("default").Update(context.Background(), resumed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.sync()
	if n := cl.writes("create", "replicasets"); n != 1 {
		t.Errorf("resumed deployment created %d replica sets, want 1", n)
	}
}

func TestRevisionHistoryLimitDeletesOldestScaledDownSets(t *testing.T) {
	d := newDeployment(1, "nginx:4", 1, 0)
	d.Spec.RevisionHistoryLimit = ptr(int32(1))
	d.Annotations = map[string]string{RevisionAnnotation: "4"}
	objs := []runtime.Object{d}
	for i := 1; i <= 3; i++ {
		objs = append(objs, replicaSetFor(d, fmt.Sprintf("nginx:%d", i), i, 0, time.Duration(5-i)*time.Hour))
	}
	objs = append(objs, replicaSetFor(d, "nginx:4", 4, 1, time.Hour))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	cl := newCluster(t, objs...)
	cl.sync()
	var deleted []string
	for _, a := range cl.client.Actions() {
		if a.GetVerb() == "delete" {
			deleted = append(deleted, a.(clienttesting.DeleteAction).GetName())
		}
	}
	var revs []string
	for _, rs := range cl.replicaSets() {
		revs = append(revs, rs.Annotations[RevisionAnnotation])
	}
	if len(deleted) != 2 || !slices.Equal(revs, []string{"3", "4"}) {
		t.Errorf("deleted %v, left revisions %v; want revisions 1 and 2 deleted", deleted, revs)
	}
}

func TestAdoptsOrphanReplicaSet(t *testing.T) {
	d := newDeployment(2, "nginx:1", 1, 0)
	rs := replicaSetFor(d, "nginx:1", 1, 2, time.Hour)
	rs.OwnerReferences = nil
	cl := newCluster(t, d, rs)
	cl.sync()
	if n := cl.writes("patch", "replicasets"); n != 1 {
		t.Fatalf("%d patches, want the orphan adopted", n)
	}
	if n := cl.writes("create", "replicasets"); n != 0 {
		t.Errorf("created %d replica sets although the orphan matches the template", n)
	}
	got, _ := cl.client.AppsV1().ReplicaSets("default").Get(context.Background(), rs.Name, metav1.GetOptions{})
	if !util.IsControlledBy(got, d) {
		t.Errorf("orphan owner refs %+v", got.OwnerReferences)
	}
}

// TestStaleOldStatusKeepsMinAvailable: an old ReplicaSet the controller has just scaled
// down still reports the available pods it had (its controller has not deleted any
// yet). Counting them would let the next sync scale it down again as if they all
// stayed, leaving fewer than replicas-maxUnavailable available; at most its spec's
// worth of them will.
func TestStaleOldStatusKeepsMinAvailable(t *testing.T) {
	d := newDeployment(4, "nginx:2", 2, 1)
	d.Generation = 2
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	old := replicaSetFor(d, "nginx:1", 1, 3, time.Hour)
	old.Status = appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4} // before its scale-down from 4
	newRS := replicaSetFor(d, "nginx:2", 2, 3, time.Minute)
	newRS.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 1}
	cl := newCluster(t, d, old, newRS)
	cl.sync()
	rss := cl.replicaSets()
	// Available after the scale-down: the old set's remaining pods (at most its spec)
	// and the new set's one.
	if left := specReplicas(rss[0]) + rss[1].Status.AvailableReplicas; left < 3 {
		t.Fatalf("old set scaled to %d with 1 new pod available: %d available, want at least replicas-maxUnavailable = 3 (%s)", specReplicas(rss[0]), left, describe(rss))
	}
}

// A deployment whose status is already right but whose revision annotation is missing
// (a client removed it) gets it back from the next sync, in a status write.
func TestMissingRevisionIsWrittenWithoutAStatusChange(t *testing.T) {
	cl := newCluster(t, newDeployment(3, "nginx:1", 1, 0))
	cl.sync()
	cl.kubelet()
	cl.sync()
	d := cl.deployment()
	if !deploymentComplete(d, &d.Status) {
		t.Fatalf("the first rollout did not complete: %+v", d.Status)
	}
	delete(d.Annotations, RevisionAnnotation)
	if _, err := cl.client.AppsV1().Deployments("default").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.sync()
	if rev := cl.deployment().Annotations[RevisionAnnotation]; rev != "1" {
		t.Errorf("deployment revision %q after the sync, want 1", rev)
	}
	if main, status := cl.deploymentUpdates(); main != 0 || status != 1 {
		t.Errorf("%d updates of the deployment and %d of its status, want 0 and 1", main, status)
	}
	cl.sync()
	if main, status := cl.deploymentUpdates(); main != 0 || status != 0 {
		t.Errorf("a sync with nothing to change: %d updates of the deployment and %d of its status", main, status)
	}
}

// A sync that updates the new ReplicaSet's annotations (here, one copied from the
// deployment) sends the change and leaves the informer's object as it was: the cache
// is shared with every other controller. (The sync works on copies of the claimed
// sets, and the annotation update on a copy of its own map; either alone keeps it.)
func TestAnnotationSyncLeavesTheCachedReplicaSetAlone(t *testing.T) {
	cl := newCluster(t, newDeployment(3, "nginx:1", 1, 0))
	cl.sync()
	d := cl.deployment()
	d.Annotations["team"] = "web"
	if _, err := cl.client.AppsV1().Deployments("default").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.observe()
	cached, err := cl.f.Apps().V1().ReplicaSets().Lister().ReplicaSets("default").List(labels.Everything())
	if err != nil || len(cached) != 1 {
		t.Fatalf("cached ReplicaSets %v, %v; want 1", cached, err)
	}
	before := cached[0].DeepCopy()
	cl.client.ClearActions()
	if err := cl.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	if got := cl.replicaSets()[0].Annotations["team"]; got != "web" {
		t.Errorf("the ReplicaSet's team annotation is %q after the sync, want web", got)
	}
	if !apiequality.Semantic.DeepEqual(cached[0], before) {
		t.Errorf("the sync changed the cached ReplicaSet: annotations %v, were %v", cached[0].Annotations, before.Annotations)
	}
}

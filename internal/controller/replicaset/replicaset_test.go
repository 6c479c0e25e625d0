package replicaset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/util/controllertest"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 2},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

type podOpt func(*corev1.Pod)

func ownedBy(rs *appsv1.ReplicaSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{*util.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
}
func onNode(n string) podOpt          { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func labelled(l map[string]string) podOpt {
	return func(p *corev1.Pod) { p.Labels = l }
}
func readySince(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	}
}

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		Labels: map[string]string{"app": "web", "tier": "front"}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// fixture is a controller whose informer caches the test fills by hand, so each sync
// sees exactly the observed state the story describes.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
	clock  *clocktesting.FakeClock
	before map[string]bool // pods that existed when the current sync started
	events *record.FakeRecorder
}

func newFixture(t *testing.T, rc bool, objs ...runtime.Object) *fixture {
	client := fake.NewClientset(objs...)
	controllertest.GenerateNames(client)
	f := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(now)
	var c *Controller
	if rc {
		c = NewReplicationController(client, f, clk)
	} else {
		c = NewReplicaSet(client, f, clk)
	}
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Pod:
			f.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			f.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *corev1.ReplicationController:
			f.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		}
	}
	events := record.NewFakeRecorder(100)
	c.recorder = events
	return &fixture{t: t, client: client, f: f, c: c, clock: clk, events: events}
}

func (fx *fixture) sync(key string) error {
	fx.client.ClearActions()
	fx.before = map[string]bool{}
	list, _ := fx.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	for _, p := range list.Items {
		fx.before[p.Name] = true
	}
	fx.client.ClearActions()
	return fx.c.Sync(context.Background(), key)
}

// created returns the pods the last sync created, as stored (with generated names).
func (fx *fixture) created() []*corev1.Pod {
	var out []*corev1.Pod
	list, _ := fx.client.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	for _, p := range list.(*corev1.PodList).Items {
		if !fx.before[p.Name] {
			out = append(out, &p)
		}
	}
	return out
}

// createCalls counts the pod creations the last sync attempted, failed or not.
func (fx *fixture) createCalls() int {
	n := 0
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

func (fx *fixture) deleted() []string {
	var out []string
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			out = append(out, a.(clienttesting.DeleteAction).GetName())
		}
	}
	slices.Sort(out)
	return out
}

// observe delivers created pods to the informer's cache and the controller, as the
// watch would.
func (fx *fixture) observe(created []*corev1.Pod) {
	for _, p := range created {
		p.UID = types.UID("uid-" + p.Name)
		fx.f.Core().V1().Pods().Informer().GetIndexer().Add(p)
		fx.c.addPod(p)
	}
}

func (fx *fixture) lastRSStatus() *appsv1.ReplicaSetStatus {
	var st *appsv1.ReplicaSetStatus
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			if rs, ok := a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet); ok {
				st = &rs.Status
			}
		}
	}
	return st
}

func TestScaleUpCreatesOwnedPodsFromTemplate(t *testing.T) {
	rs := newRS("web-abc", 3)
	fx := newFixture(t, false, rs)
	if err := fx.sync("default/web-abc"); err != nil {
		t.Fatal(err)
	}
	created := fx.created()
	if len(created) != 3 {
		t.Fatalf("created %d pods, want 3", len(created))
	}
	for _, p := range created {
		if p.GenerateName != "web-abc-" || !strings.HasPrefix(p.Name, "web-abc-") {
			t.Errorf("pod named %q generateName %q, want generateName web-abc-", p.Name, p.GenerateName)
		}
		if p.Labels["tier"] != "front" || p.Spec.Containers[0].Image != "nginx" {
			t.Errorf("pod %s does not carry the template: %v", p.Name, p.Labels)
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.UID != rs.UID ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s controller ref = %+v", p.Name, ref)
		}
	}
	for range 3 {
		if e := <-fx.events.Events; !strings.HasPrefix(e, "Normal SuccessfulCreate Created pod: web-abc-") {
			t.Errorf("event %q, want SuccessfulCreate", e)
		}
	}
	// The count without the new pods would be overwritten moments later: the sync
	// that created them writes no status, the one after they reach the cache does.
	if st := fx.lastRSStatus(); st != nil {
		t.Errorf("status written before the cache has seen the created pods: %+v", st)
	}
	fx.observe(created)
	if err := fx.sync("default/web-abc"); err != nil {
		t.Fatal(err)
	}
	if st := fx.lastRSStatus(); st == nil || st.ObservedGeneration != 2 || st.Replicas != 3 {
		t.Errorf("status = %+v, want observedGeneration 2 and replicas 3", st)
	}
}

func TestBurstLimitedScaleUpWritesItsProgress(t *testing.T) {
	fx := newFixture(t, false, newRS("big", BurstReplicas+1))
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the fake recorder holds 100 events; the burst makes 500
		for {
			select {
			case <-fx.events.Events:
			case <-stop:
				return
			}
		}
	}()
	if err := fx.sync("default/big"); err != nil {
		t.Fatal(err)
	}
	if n := len(fx.created()); n != BurstReplicas {
		t.Fatalf("created %d pods, want the burst of %d", n, BurstReplicas)
	}
	// One more pod is owed, so this sync's count is not the set's last word: it is
	// written, as upstream writes each step of a large scale-up.
	if st := fx.lastRSStatus(); st == nil || st.ObservedGeneration != 2 {
		t.Errorf("status = %+v, want one written with observedGeneration 2", st)
	}
}

func TestSlowCacheNeverCreatesExtraPods(t *testing.T) {
	fx := newFixture(t, false, newRS("web", 2))
	if err := fx.sync("default/web"); err != nil {
		t.Fatal(err)
	}
	first := fx.created()
	// The informer has not delivered the new pods: a second sync must wait.
	if err := fx.sync("default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(fx.created()); n != 0 {
		t.Fatalf("second sync created %d more pods before the cache caught up", n)
	}
	// The watch now delivers them; the controller is satisfied and creates nothing more.
	fx.observe(first)
	if err := fx.sync("default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(fx.created()); n != 0 {
		t.Fatalf("created %d pods with 2 of 2 present", n)
	}
	if st := fx.lastRSStatus(); st == nil || st.Replicas != 2 || st.FullyLabeledReplicas != 2 {
		t.Errorf("status = %+v, want replicas 2 fullyLabeled 2", st)
	}
}

func TestScaleDownDeletesTheCheapestPods(t *testing.T) {
	rs := newRS("web", 2)
	tests := []struct {
		name string
		pods []*corev1.Pod
		want []string
	}{
		{"unscheduled before scheduled", []*corev1.Pod{
			pod("a", ownedBy(rs), onNode("n1"), readySince(now.Add(-time.Hour))),
			pod("b", ownedBy(rs), phase(corev1.PodPending)),
			pod("c", ownedBy(rs), onNode("n2"), readySince(now.Add(-time.Hour))),
		}, []string{"b"}},
		{"pending before running", []*corev1.Pod{
			pod("a", ownedBy(rs), onNode("n1"), phase(corev1.PodPending)),
			pod("b", ownedBy(rs), onNode("n2"), readySince(now.Add(-time.Hour))),
			pod("c", ownedBy(rs), onNode("n3"), readySince(now.Add(-time.Hour))),
		}, []string{"a"}},
		{"not ready before ready", []*corev1.Pod{
			pod("a", ownedBy(rs), onNode("n1"), readySince(now.Add(-time.Hour))),
			pod("b", ownedBy(rs), onNode("n2"), phase(corev1.PodRunning)),
			pod("c", ownedBy(rs), onNode("n3"), readySince(now.Add(-time.Hour))),
		}, []string{"b"}},
		{"ready for less time first", []*corev1.Pod{
			pod("a", ownedBy(rs), onNode("n1"), readySince(now.Add(-time.Hour))),
			pod("b", ownedBy(rs), onNode("n2"), readySince(now.Add(-time.Hour))),
			pod("c", ownedBy(rs), onNode("n3"), readySince(now.Add(-time.Minute))),
		}, []string{"c"}},
		{"two surplus pods", []*corev1.Pod{
			pod("a", ownedBy(rs), onNode("n1"), readySince(now.Add(-time.Hour))),
			pod("b", ownedBy(rs)),
			pod("c", ownedBy(rs), onNode("n3"), phase(corev1.PodPending)),
			pod("d", ownedBy(rs), onNode("n4"), readySince(now.Add(-time.Hour))),
		}, []string{"b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{rs}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			fx := newFixture(t, false, objs...)
			if err := fx.sync("default/web"); err != nil {
				t.Fatal(err)
			}
			if got := fx.deleted(); !slices.Equal(got, tt.want) {
				t.Errorf("deleted %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdoptsMatchingOrphansAndReleasesMismatches(t *testing.T) {
	rs := newRS("web", 2)
	other := newRS("other", 1)
	fx := newFixture(t, false, rs,
		pod("orphan"),
		pod("relabelled", ownedBy(rs), labelled(map[string]string{"app": "debug"})),
		pod("kept", ownedBy(rs)),
		pod("foreign", ownedBy(other)),
		pod("done", phase(corev1.PodSucceeded)),
	)
	if err := fx.sync("default/web"); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range fx.client.Actions() {
		if a.GetVerb() == "patch" {
			pa := a.(clienttesting.PatchAction)
			patched = append(patched, pa.GetName()+" "+string(pa.GetPatch()))
		}
	}
	slices.Sort(patched)
	if len(patched) != 2 || !strings.HasPrefix(patched[0], "orphan ") || !strings.HasPrefix(patched[1], "relabelled ") {
		t.Fatalf("patches = %v, want adopt orphan and release relabelled", patched)
	}
	if !strings.Contains(patched[0], `"controller":true`) || !strings.Contains(patched[0], `"uid":"uid-web"`) {
		t.Errorf("adoption patch %s lacks the controller ref", patched[0])
	}
	if !strings.Contains(patched[1], `"$patch":"delete"`) {
		t.Errorf("release patch %s does not delete the ref", patched[1])
	}
	adopted, _ := fx.client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	if !util.IsControlledBy(adopted, rs) {
		t.Errorf("orphan is not controlled by web after the patch: %+v", adopted.OwnerReferences)
	}
	released, _ := fx.client.CoreV1().Pods("default").Get(context.Background(), "relabelled", metav1.GetOptions{})
	if len(released.OwnerReferences) != 0 {
		t.Errorf("relabelled pod still has owner refs %+v", released.OwnerReferences)
	}
	if n := len(fx.created()) + len(fx.deleted()); n != 0 {
		t.Errorf("with kept+orphan = 2 of 2 the controller wrote %d pods", n)
	}
}

func TestStatusCountsReadyAndAvailable(t *testing.T) {
	rs := newRS("web", 3)
	rs.Spec.MinReadySeconds = 30
	fx := newFixture(t, false, rs,
		pod("old", ownedBy(rs), onNode("n"), readySince(now.Add(-time.Minute))),
		pod("fresh", ownedBy(rs), onNode("n"), readySince(now.Add(-10*time.Second))),
		pod("starting", ownedBy(rs), onNode("n"), phase(corev1.PodRunning), labelled(map[string]string{"app": "web"})),
	)
	if err := fx.sync("default/web"); err != nil {
		t.Fatal(err)
	}
	want := appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 2}
	if st := fx.lastRSStatus(); st == nil || !reflect.DeepEqual(*st, want) {
		t.Errorf("status = %+v, want %+v", st, want)
	}
}

func TestRejectedCreatesStartSlowAndReportFailure(t *testing.T) {
	fx := newFixture(t, false, newRS("web", 10))
	fx.client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("exceeded quota")
	})
	if err := fx.sync("default/web"); err == nil {
		t.Fatal("sync succeeded although every create failed")
	}
	if n := fx.createCalls(); n != 1 {
		t.Errorf("attempted %d creates, want 1 (the first slow-start batch)", n)
	}
	st := fx.lastRSStatus()
	if st == nil || len(st.Conditions) != 1 || st.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure ||
		st.Conditions[0].Reason != "FailedCreate" {
		t.Fatalf("status = %+v, want a ReplicaFailure/FailedCreate condition", st)
	}
	// Expectations were released for every pod not created, so the retry tries again.
	if err := fx.sync("default/web"); err == nil || fx.createCalls() != 1 {
		t.Errorf("retry attempted %d creates, want 1", fx.createCalls())
	}
}

func TestSlowStartBatchSizes(t *testing.T) {
	for _, tt := range []struct{ count, failAt, wantCalls, wantOK int }{
		{count: 10, failAt: -1, wantCalls: 10, wantOK: 10},
		{count: 10, failAt: 0, wantCalls: 1, wantOK: 0},
		{count: 10, failAt: 1, wantCalls: 3, wantOK: 2}, // batches 1, 2
		{count: 10, failAt: 3, wantCalls: 7, wantOK: 6}, // batches 1, 2, 4
	} {
		t.Run(fmt.Sprint(tt), func(t *testing.T) {
			calls := make(chan struct{}, 100)
			ok, err := util.SlowStartBatch(tt.count, func() error {
				calls <- struct{}{}
				if tt.failAt >= 0 && len(calls) == tt.failAt+1 {
					return errors.New("boom")
				}
				return nil
			})
			if len(calls) != tt.wantCalls || ok != tt.wantOK || (err != nil) != (tt.failAt >= 0) {
				t.Errorf("calls=%d ok=%d err=%v", len(calls), ok, err)
			}
		})
	}
}

func TestReplicationControllerSharesTheImplementation(t *testing.T) {
	replicas := int32(2)
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "default", UID: "uid-legacy", Generation: 1},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: map[string]string{"app": "legacy"},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	fx := newFixture(t, true, rc, pod("unrelated"))
	if err := fx.sync("default/legacy"); err != nil {
		t.Fatal(err)
	}
	created := fx.created()
	if len(created) != 2 {
		t.Fatalf("created %d pods, want 2", len(created))
	}
	ref := metav1.GetControllerOf(created[0])
	if ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || created[0].GenerateName != "legacy-" {
		t.Errorf("pod ref %+v generateName %q", ref, created[0].GenerateName)
	}
	fx.observe(created)
	if err := fx.sync("default/legacy"); err != nil {
		t.Fatal(err)
	}
	var status *corev1.ReplicationControllerStatus
	for _, a := range fx.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			status = &u.GetObject().(*corev1.ReplicationController).Status
		}
	}
	if status == nil || status.ObservedGeneration != 1 || status.Replicas != 2 {
		t.Errorf("rc status = %+v, want observedGeneration 1 and replicas 2", status)
	}
}

// A pod event goes to the set its controller reference names only while that set is
// the one the reference was made for: a set deleted and made again under the same
// name (another UID) does not get the old set's pods, nor does a set of another kind.
func TestPodEventsGoToTheirOwnerOnly(t *testing.T) {
	rs := newRS("web", 2)
	old := rs.DeepCopy()
	old.UID = "uid-web-before"
	fx := newFixture(t, false, rs)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"owned by the set", pod("a", ownedBy(rs)), "default/web"},
		{"owned by an earlier set of the same name", pod("b", ownedBy(old)), ""},
		{"owned by a set not in the cache", pod("c", ownedBy(newRS("gone", 1))), ""},
		{"owned by another kind of the same name", pod("d", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{*util.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
		}), ""},
	} {
		ref := metav1.GetControllerOf(tc.pod)
		if got := fx.c.ownerKey(tc.pod, ref); got != tc.want {
			t.Errorf("%s: owner key %q, want %q", tc.name, got, tc.want)
		}
	}
}

package daemonset

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/util/controllertest"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func newDaemonSet(image string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "agent"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "uid-agent", Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: image}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromInt32(0))}},
		},
	}
}

type world struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	f      informers.SharedInformerFactory
	c      *Controller
}

func newWorld(t *testing.T, objs ...runtime.Object) *world {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	controllertest.GenerateNames(client)
	f := informers.NewSharedInformerFactory(client, 0)
	w := &world{t: t, ctx: ctx, client: client, f: f, c: New(client, f, clocktesting.NewFakeClock(t0))}
	w.c.recorder = record.NewFakeRecorder(1000)
	controllertest.StartInformers(t, ctx, f)
	return w
}

func (w *world) pods() []*corev1.Pod {
	list, _ := w.client.CoreV1().Pods("kube-system").List(w.ctx, metav1.ListOptions{})
	var out []*corev1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

func (w *world) sync() {
	w.t.Helper()
	controllertest.WaitForCache(w.t, w.f.Core().V1().Pods().Informer().GetStore(), func() []any {
		var out []any
		for _, p := range w.pods() {
			out = append(out, p)
		}
		return out
	})
	controllertest.WaitForCache(w.t, w.f.Apps().V1().DaemonSets().Informer().GetStore(), func() []any {
		ds, err := w.client.AppsV1().DaemonSets("kube-system").Get(w.ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return []any{ds}
	})
	controllertest.WaitForCache(w.t, w.f.Apps().V1().ControllerRevisions().Informer().GetStore(), func() []any {
		list, _ := w.client.AppsV1().ControllerRevisions("kube-system").List(w.ctx, metav1.ListOptions{})
		var out []any
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	})
	if err := w.c.Sync(w.ctx, "kube-system/agent"); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

// kubelet plays the scheduler and the kubelets: every pod lands on its pinned node and
// becomes ready.
func (w *world) kubelet() {
	for _, p := range w.pods() {
		if util.IsPodReady(p) {
			continue
		}
		p.Spec.NodeName = targetNode(p)
		p, err := w.client.CoreV1().Pods("kube-system").Update(w.ctx, p, metav1.UpdateOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
		if _, err := w.client.CoreV1().Pods("kube-system").UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) daemonSet() *appsv1.DaemonSet {
	ds, err := w.client.AppsV1().DaemonSets("kube-system").Get(w.ctx, "agent", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return ds
}

func podNodes(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, targetNode(p))
	}
	slices.Sort(out)
	return out
}

func TestOnePodPerEligibleNode(t *testing.T) {
	nodes := []runtime.Object{
		node("plain", nil),
		node("ssd", map[string]string{"disk": "ssd"}),
		node("dedicated", nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}),
		node("cordoned", nil, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}),
		node("notready", nil, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}),
		node("evicting", nil, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}),
	}
	for _, tt := range []struct {
		name  string
		setup func(*appsv1.DaemonSet)
		want  []string
	}{
		{"taints with automatic tolerations", func(*appsv1.DaemonSet) {}, []string{"cordoned", "notready", "plain", "ssd"}},
		{"nodeSelector", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, []string{"ssd"}},
		{"node affinity", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}
		}, []string{"cordoned", "notready", "plain"}},
		{"own toleration", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}}
		}, []string{"cordoned", "dedicated", "notready", "plain", "ssd"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDaemonSet("agent:1")
			tt.setup(ds)
			w := newWorld(t, append(nodes, ds)...)
			w.sync()
			pods := w.pods()
			if got := podNodes(pods); !slices.Equal(got, tt.want) {
				t.Fatalf("pods for nodes %v, want %v", got, tt.want)
			}
			for _, p := range pods {
				if !util.IsControlledBy(p, ds) || p.Labels[util.ControllerRevisionHashLabel] == "" || p.Spec.NodeName != "" {
					t.Errorf("pod %s: owners %v labels %v nodeName %q", p.Name, p.OwnerReferences, p.Labels, p.Spec.NodeName)
				}
				req := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(req) != 1 || req[0].MatchFields[0].Key != "metadata.name" {
					t.Errorf("pod %s affinity %+v, want a metadata.name field match", p.Name, req)
				}
				if !tolerated(p.Spec.Tolerations, &corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}) {
					t.Errorf("pod %s lacks the automatic unreachable toleration", p.Name)
				}
			}
			w.kubelet()
			w.sync()
			st := w.daemonSet().Status
			n := int32(len(tt.want))
			if st.DesiredNumberScheduled != n || st.CurrentNumberScheduled != n || st.NumberReady != n ||
				st.NumberAvailable != n || st.UpdatedNumberScheduled != n || st.NumberUnavailable != 0 || st.ObservedGeneration != 1 {
				t.Errorf("status %+v, want %d everywhere", st, n)
			}
		})
	}
}

func TestNoExecuteTaintEvictsAndNoScheduleKeeps(t *testing.T) {
	ds := newDaemonSet("agent:1")
	w := newWorld(t, ds, node("a", nil), node("b", nil))
	w.sync()
	w.kubelet()
	for name, taint := range map[string]corev1.Taint{
		"a": {Key: "dedicated", Effect: corev1.TaintEffectNoSchedule},
		"b": {Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
	} {
		n, _ := w.client.CoreV1().Nodes().Get(w.ctx, name, metav1.GetOptions{})
		n.Spec.Taints = []corev1.Taint{taint}
		if _, err := w.client.CoreV1().Nodes().Update(w.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.WaitForCache(t, w.f.Core().V1().Nodes().Informer().GetStore(), func() []any {
		list, _ := w.client.CoreV1().Nodes().List(w.ctx, metav1.ListOptions{})
		return []any{&list.Items[0], &list.Items[1]}
	})
	w.sync()
	if got := podNodes(w.pods()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("pods on %v, want only a (NoSchedule keeps running pods, NoExecute removes them)", got)
	}
	w.sync()
	if st := w.daemonSet().Status; st.NumberMisscheduled != 1 || st.DesiredNumberScheduled != 0 {
		t.Errorf("status %+v, want 1 misscheduled, 0 desired", st)
	}
}

func changeImage(w *world, image string) {
	ds := w.daemonSet()
	ds.Spec.Template.Spec.Containers[0].Image = image
	ds.Generation++
	if _, err := w.client.AppsV1().DaemonSets("kube-system").Update(w.ctx, ds, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// rollOut syncs and plays the kubelet until every node runs the new revision,
// checking after every sync the bounds on pods and available nodes.
func rollOut(w *world, nodes, maxPods, minAvailable int) {
	w.t.Helper()
	for step := 0; step < 30; step++ {
		w.sync()
		pods := w.pods()
		available := map[string]bool{}
		for _, p := range pods {
			if util.IsPodReady(p) {
				available[targetNode(p)] = true
			}
		}
		if len(pods) > maxPods || len(available) < minAvailable {
			w.t.Fatalf("step %d: %d pods, %d nodes available; bounds are %d pods, %d available", step, len(pods), len(available), maxPods, minAvailable)
		}
		ds := w.daemonSet()
		if ds.Status.UpdatedNumberScheduled == int32(nodes) && ds.Status.NumberAvailable == int32(nodes) && len(pods) == nodes {
			return
		}
		w.kubelet()
	}
	w.t.Fatalf("rollout did not finish: %+v", w.daemonSet().Status)
}

func TestRollingUpdate(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		surge, unavailable    int32
		maxPods, minAvailable int
	}{
		{"maxUnavailable 1", 0, 1, 4, 3},
		{"maxUnavailable 2", 0, 2, 4, 2},
		{"maxSurge 1", 1, 0, 5, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDaemonSet("agent:1")
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr(intstr.FromInt32(tt.unavailable)), MaxSurge: ptr(intstr.FromInt32(tt.surge))}
			w := newWorld(t, ds, node("a", nil), node("b", nil), node("c", nil), node("d", nil))
			w.sync()
			w.kubelet()
			w.sync()
			oldHash := w.pods()[0].Labels[util.ControllerRevisionHashLabel]
			changeImage(w, "agent:2")
			rollOut(w, 4, tt.maxPods, tt.minAvailable)
			for _, p := range w.pods() {
				if p.Labels[util.ControllerRevisionHashLabel] == oldHash || p.Spec.Containers[0].Image != "agent:2" {
					t.Errorf("pod %s still runs the old revision", p.Name)
				}
			}
			revs, _ := w.client.AppsV1().ControllerRevisions("kube-system").List(w.ctx, metav1.ListOptions{})
			if len(revs.Items) != 2 {
				t.Errorf("%d controller revisions, want 2", len(revs.Items))
			}
		})
	}
}

func TestOnDeleteWaitsForTheUser(t *testing.T) {
	ds := newDaemonSet("agent:1")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	w := newWorld(t, ds, node("a", nil), node("b", nil))
	w.sync()
	w.kubelet()
	changeImage(w, "agent:2")
	w.sync()
	w.sync()
	pods := w.pods()
	for _, p := range pods {
		if p.Spec.Containers[0].Image != "agent:1" {
			t.Fatalf("OnDelete replaced pod %s on its own", p.Name)
		}
	}
	if err := w.client.CoreV1().Pods("kube-system").Delete(w.ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	images := map[string]string{}
	for _, p := range w.pods() {
		images[targetNode(p)] = p.Spec.Containers[0].Image
	}
	if len(images) != 2 || images[targetNode(pods[0])] != "agent:2" || images[targetNode(pods[1])] != "agent:1" {
		t.Errorf("images by node %v: want the deleted pod replaced with agent:2, the other untouched", images)
	}
}

func TestRevisionDataRollsBack(t *testing.T) {
	tpl := newDaemonSet("agent:1").Spec.Template
	data, err := util.TemplatePatch(&tpl)
	if err != nil {
		t.Fatal(err)
	}
	ds := newDaemonSet("agent:2")
	w := newWorld(t, ds, node("a", nil))
	w.sync()
	ds = w.daemonSet()
	ds.Spec.Template = tpl
	if _, err := w.client.AppsV1().DaemonSets("kube-system").Update(w.ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	revs, _ := w.client.AppsV1().ControllerRevisions("kube-system").List(w.ctx, metav1.ListOptions{})
	var newest appsv1.ControllerRevision
	for _, r := range revs.Items {
		if r.Revision > newest.Revision {
			newest = r
		}
	}
	if newest.Revision != 2 || !util.SameRevisionData(newest.Data, data) {
		t.Errorf("newest revision %d data %s, want revision 2 holding the agent:1 template", newest.Revision, newest.Data.Raw)
	}
}

func TestFailedPodIsReplacedWithBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(newDaemonSet("agent:1"), node("a", nil))
	controllertest.GenerateNames(client)
	f := informers.NewSharedInformerFactory(client, 0)
	events := record.NewFakeRecorder(1000)
	w := &world{t: t, ctx: ctx, client: client, f: f, c: New(client, f, clk)}
	w.c.recorder = events
	controllertest.StartInformers(t, ctx, f)
	fail := func() {
		for _, p := range w.pods() {
			p.Status.Phase = corev1.PodFailed
			if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.sync()
	fail()
	w.sync() // first failure: replaced at once
	w.sync()
	if pods := w.pods(); len(pods) != 1 || pods[0].Status.Phase == corev1.PodFailed {
		t.Fatalf("want one fresh pod after the first failure, have %d", len(pods))
	}
	fail()
	w.sync()
	if pods := w.pods(); len(pods) != 1 || pods[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("failed pod replaced again within the back-off")
	}
	failedEvents := 0
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.HasPrefix(e, "Warning FailedDaemonPod Found failed daemon pod kube-system/agent-") {
			failedEvents++
		}
	}
	if failedEvents != 1 {
		t.Errorf("%d FailedDaemonPod events, want 1 (the second failure waits)", failedEvents)
	}
	clk.Step(3 * time.Second)
	w.sync()
	w.sync()
	if pods := w.pods(); len(pods) != 1 || pods[0].Status.Phase == corev1.PodFailed {
		t.Fatalf("failed pod not replaced after the back-off")
	}
}

// TestReplacementWaitsForTheTerminatingPod: a node's daemon pod being deleted but still
// running keeps its replacement from starting (upstream counts it), so that a rollback
// finds the old pods it keeps and the node never runs two; once the pod is terminal,
// the replacement starts.
func TestReplacementWaitsForTheTerminatingPod(t *testing.T) {
	w := newWorld(t, newDaemonSet("agent:1"), node("a", nil))
	w.sync()
	w.kubelet()
	w.sync()
	pods := w.pods()
	if len(pods) != 1 {
		t.Fatalf("%d pods, want 1", len(pods))
	}
	terminating := pods[0]
	terminating.DeletionTimestamp = ptr(metav1.NewTime(t0))
	terminating, err := w.client.CoreV1().Pods("kube-system").Update(w.ctx, terminating, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.sync()
	if pods := w.pods(); len(pods) != 1 {
		t.Fatalf("while the pod terminates: %d pods, want only the terminating one", len(pods))
	}
	terminating.Status.Phase = corev1.PodSucceeded
	if _, err := w.client.CoreV1().Pods("kube-system").UpdateStatus(w.ctx, terminating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.sync()
	var replacements int
	for _, p := range w.pods() {
		if p.DeletionTimestamp == nil {
			replacements++
		}
	}
	if replacements != 1 {
		t.Fatalf("after the pod stopped: %d replacements, want 1", replacements)
	}
}

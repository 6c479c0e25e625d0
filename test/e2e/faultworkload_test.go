package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The fault workload's Deployments: web runs real containers on the real node behind
// a readiness probe; churn runs on the hollow nodes, so that the scheduler has a choice
// of node and a pod bound twice would show as a changed nodeName.
const (
	faultNS       = "default"
	faultMaxSurge = 1
)

type faultDeployment struct {
	name             string
	minReplicas      int32
	maxReplicas      int32
	realNode, probed bool
}

var faultDeployments = []faultDeployment{
	{name: "web", minReplicas: 1, maxReplicas: 3, realNode: true, probed: true},
	{name: "churn", minReplicas: 2, maxReplicas: 6},
}

func (d faultDeployment) object(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": d.name}
	spec := v1.PodSpec{TerminationGracePeriodSeconds: ptr[int64](1)}
	if d.realNode {
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": faultNode}
		spec.Containers = []v1.Container{{Name: "web", Image: agnhostImage, Args: []string{"netexec", "--http-port=8080"},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}}
	} else {
		spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{faultHollow + "0", faultHollow + "1"}}}}}}}}
		spec.Containers = []v1.Container{{Name: "sleep", Image: busyboxImage, Command: []string{"sleep", "3600"}}}
	}
	surge, unavailable := intstr.FromInt32(faultMaxSurge), intstr.FromInt32(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: d.name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// faultRecord is what the suite observed over its whole run: the writes the API
// acknowledged, the replica counts the workload asked for, and what a watch on pods saw.
type faultRecord struct {
	mu sync.Mutex
	// writes are the ConfigMap writer's, per key.
	writes map[string]*keyWrites
	// maxAsked is the most replicas the workload ever asked of each Deployment.
	maxAsked map[string]int32

	// From the pod watch: every pod's node (by UID), the pods each ReplicaSet and each
	// Deployment (by app label) has, and the most either ever had at once.
	nodeOf              map[types.UID]string
	live                map[types.UID]*v1.Pod
	maxPerRS, maxPerApp map[string]int
	rsName              map[string]string
	// maxSpec is the most replicas each ReplicaSet (by UID) was ever asked for, from a
	// watch on ReplicaSets: its controller creates a pod only while it has fewer.
	maxSpec     map[string]int32
	reboundPods []string
	// seq numbers the workload's objects and values, unique across the run.
	seq atomic.Int64
	// ops and failed count the workload's requests, to show it did work.
	ops, failed atomic.Int64
}

// summary says how much the run did and saw.
func (r *faultRecord) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	acked, unknown := 0, 0
	for _, w := range r.writes {
		if w.acked != "" {
			acked++
		}
		unknown += len(w.unknown)
	}
	return fmt.Sprintf("%d workload requests (%d failed); %d ConfigMaps acknowledged, %d writes of unknown outcome; %d pods seen; most pods at once per Deployment %v, replicas asked at most %v",
		r.ops.Load(), r.failed.Load(), acked, unknown, len(r.nodeOf), r.maxPerApp, r.maxAsked)
}

// count records one workload request's outcome.
func (r *faultRecord) count(err error) {
	r.ops.Add(1)
	if err != nil {
		r.failed.Add(1)
	}
}

// keyWrites is one ConfigMap's writes: the last value acknowledged, and every value
// whose write had an unknown outcome (a timeout or a connection cut): such a write may
// still be applied later, even after one acknowledged since, so each stays possible.
type keyWrites struct {
	created bool
	acked   string
	unknown []string
}

func newFaultRecord() *faultRecord {
	return &faultRecord{writes: map[string]*keyWrites{}, maxAsked: map[string]int32{}, nodeOf: map[types.UID]string{},
		live: map[types.UID]*v1.Pod{}, maxPerRS: map[string]int{}, maxPerApp: map[string]int{}, rsName: map[string]string{}, maxSpec: map[string]int32{}}
}

// watchPods records, from an informer on pods (which relists across apiserver
// restarts), each pod's nodeName changes and the pods each owner had at once.
func (r *faultRecord) watchPods(ctx context.Context, client kubernetes.Interface) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(faultNS))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			r.observe(obj, true)
		},
	})
	rsInf := factory.Apps().V1().ReplicaSets().Informer()
	observeRS := func(obj any) {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok && rs.Spec.Replicas != nil {
			r.mu.Lock()
			r.maxSpec[string(rs.UID)] = max(r.maxSpec[string(rs.UID)], *rs.Spec.Replicas)
			r.mu.Unlock()
		}
	}
	_, _ = rsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observeRS, UpdateFunc: func(_, obj any) { observeRS(obj) }})
	factory.Start(ctx.Done())
}

func (r *faultRecord) observe(obj any, deleted bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := pod.Spec.NodeName; n != "" {
		if old := r.nodeOf[pod.UID]; old != "" && old != n {
			r.reboundPods = append(r.reboundPods, fmt.Sprintf("pod %s bound to %s, then to %s", pod.Name, old, n))
		}
		r.nodeOf[pod.UID] = n
	}
	if deleted || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		delete(r.live, pod.UID)
	} else {
		r.live[pod.UID] = pod
	}
	perRS, perApp := map[string]int{}, map[string]int{}
	for _, p := range r.live {
		if ref := metav1.GetControllerOf(p); ref != nil {
			perRS[string(ref.UID)]++
			r.rsName[string(ref.UID)] = ref.Name
		}
		perApp[p.Labels["app"]]++
	}
	for k, n := range perRS {
		r.maxPerRS[k] = max(r.maxPerRS[k], n)
	}
	for k, n := range perApp {
		r.maxPerApp[k] = max(r.maxPerApp[k], n)
	}
}

// overReplicated lists every ReplicaSet that ever had more pods at once than it was
// asked for, or than its Deployment allows (the most replicas asked of it plus
// maxSurge). A Deployment as a whole may briefly have more: proportional scaling
// lowers one ReplicaSet and raises another in one step, and their controllers act
// independently, upstream's as well.
func (r *faultRecord) overReplicated() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for uid, n := range r.maxPerRS {
		name := r.rsName[uid]
		app := name[:strings.LastIndex(name, "-")]
		if allowed := int(r.maxAsked[app]) + faultMaxSurge; n > allowed {
			out = append(out, fmt.Sprintf("ReplicaSet %s had %d pods at once; its Deployment allows %d", name, n, allowed))
		}
		if spec := int(r.maxSpec[uid]); n > spec {
			out = append(out, fmt.Sprintf("ReplicaSet %s had %d pods at once; it was never asked for more than %d", name, n, spec))
		}
	}
	sort.Strings(out)
	return out
}

func (r *faultRecord) rebound() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reboundPods...)
}

func (r *faultRecord) asked(app string, n int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxAsked[app] = max(r.maxAsked[app], n)
}

// lostWrites reads every ConfigMap the writer wrote and lists those whose content is
// neither the last acknowledged value nor a later write of unknown outcome.
func (r *faultRecord) lostWrites(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	cms, err := client.CoreV1().ConfigMaps(faultNS).List(ctx, metav1.ListOptions{LabelSelector: "fault-writer"})
	if err != nil {
		return nil, err
	}
	have := map[string]string{}
	for _, cm := range cms.Items {
		have[cm.Name] = cm.Data["v"]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var lost []string
	for key, w := range r.writes {
		got, ok := have[key]
		allowed := append([]string{w.acked}, w.unknown...)
		switch {
		case !ok && w.acked != "":
			lost = append(lost, fmt.Sprintf("ConfigMap %s is gone; %q was acknowledged", key, w.acked))
		case ok && !contains(allowed, got):
			lost = append(lost, fmt.Sprintf("ConfigMap %s holds %q; %q was acknowledged last (unacknowledged: %v)", key, got, w.acked, w.unknown))
		}
	}
	sort.Strings(lost)
	return lost, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// faultWorkload is the churn a component is killed in the middle of: Deployments
// scaled and rolled, pods deleted, Services created, changed and deleted, ConfigMaps
// written. Every actor goes on through errors, as a user's retries would.
type faultWorkload struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startFaultWorkload(client kubernetes.Interface, rec *faultRecord) *faultWorkload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &faultWorkload{cancel: cancel}
	every := func(period time.Duration, act func(ctx context.Context)) {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				opCtx, opCancel := context.WithTimeout(ctx, 5*time.Second)
				act(opCtx)
				opCancel()
				select {
				case <-ctx.Done():
				case <-time.After(period):
				}
			}
		}()
	}
	// Scale a Deployment, and now and then roll it to a new template.
	every(1500*time.Millisecond, func(ctx context.Context) {
		d := faultDeployments[rand.IntN(len(faultDeployments))]
		n := d.minReplicas + rand.Int32N(d.maxReplicas-d.minReplicas+1)
		rec.asked(d.name, n)
		patch := map[string]any{"spec": map[string]any{"replicas": n}}
		if rand.IntN(4) == 0 {
			patch["spec"].(map[string]any)["template"] = map[string]any{"metadata": map[string]any{"annotations": map[string]string{"fault/rev": fmt.Sprint(rand.Int())}}}
		}
		body, _ := json.Marshal(patch)
		_, err := client.AppsV1().Deployments(faultNS).Patch(ctx, d.name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
		rec.count(err)
	})
	// Delete a random pod.
	every(2*time.Second, func(ctx context.Context) {
		pods, err := client.CoreV1().Pods(faultNS).List(ctx, metav1.ListOptions{LabelSelector: "app"})
		if err != nil || len(pods.Items) == 0 {
			rec.count(err)
			return
		}
		p := pods.Items[rand.IntN(len(pods.Items))]
		rec.count(client.CoreV1().Pods(faultNS).Delete(ctx, p.Name, metav1.DeleteOptions{}))
	})
	// Services: create one, delete one, or move a port's target.
	every(2*time.Second, func(ctx context.Context) {
		switch rand.IntN(3) {
		case 0:
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flip-%d", rec.seq.Add(1)), Labels: map[string]string{"fault-flip": ""}},
				Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
			_, err := client.CoreV1().Services(faultNS).Create(ctx, svc, metav1.CreateOptions{})
			rec.count(err)
		case 1:
			svcs, err := client.CoreV1().Services(faultNS).List(ctx, metav1.ListOptions{LabelSelector: "fault-flip"})
			if err == nil && len(svcs.Items) > 1 {
				err = client.CoreV1().Services(faultNS).Delete(ctx, svcs.Items[rand.IntN(len(svcs.Items))].Name, metav1.DeleteOptions{})
			}
			rec.count(err)
		case 2:
			target := 8080 + rand.IntN(2)
			body := fmt.Sprintf(`{"spec":{"ports":[{"port":80,"targetPort":%d}]}}`, target)
			_, err := client.CoreV1().Services(faultNS).Patch(ctx, "alt", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
			rec.count(err)
		}
	})
	// The ConfigMap writer: each write's outcome is recorded as the API gave it.
	for wr := 0; wr < 2; wr++ {
		every(100*time.Millisecond, func(ctx context.Context) {
			n := rec.seq.Add(1)
			rec.write(ctx, client, fmt.Sprintf("fw-%d-%d", wr, n%10), fmt.Sprint(n))
		})
	}
	return w
}

// write creates the ConfigMap key or sets its value, and records the outcome.
func (r *faultRecord) write(ctx context.Context, client kubernetes.Interface, key, value string) {
	r.mu.Lock()
	w := r.writes[key]
	if w == nil {
		w = &keyWrites{}
		r.writes[key] = w
	}
	created := w.created
	r.mu.Unlock()
	var err error
	if !created {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"fault-writer": ""}}, Data: map[string]string{"v": value}}
		_, err = client.CoreV1().ConfigMaps(faultNS).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An earlier create of unknown outcome was applied after all.
			r.mu.Lock()
			w.created = true
			r.mu.Unlock()
			return
		}
	} else {
		body := fmt.Sprintf(`{"data":{"v":%q}}`, value)
		_, err = client.CoreV1().ConfigMaps(faultNS).Patch(ctx, key, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	}
	r.count(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		w.created, w.acked = true, value
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// Refused: certainly not written.
	default:
		w.unknown = append(w.unknown, value)
	}
}

func (w *faultWorkload) stop() {
	w.cancel()
	w.wg.Wait()
}

// Package statefulset runs a StatefulSet's pods with stable identities <set>-<ordinal>,
// each with its own PersistentVolumeClaims <template>-<set>-<ordinal>, created and
// removed in order (OrderedReady) or all at once (Parallel). Template changes roll out
// from the highest ordinal down to the partition, at most maxUnavailable pods down at
// a time (RollingUpdate), or when the user deletes pods (OnDelete); revisions are
// ControllerRevisions.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// Labels a StatefulSet puts on its pods.
const (
	PodNameLabel  = appsv1.StatefulSetPodNameLabel // statefulset.kubernetes.io/pod-name
	PodIndexLabel = appsv1.PodIndexLabel           // apps.kubernetes.io/pod-index
)

var stsGVK = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Controller is the statefulset controller.
type Controller struct {
	client    kubernetes.Interface
	sets      appslisters.StatefulSetLister
	pods      corelisters.PodLister
	podInf    cache.SharedIndexInformer
	claims    corelisters.PersistentVolumeClaimLister
	revisions appslisters.ControllerRevisionLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	clock     clock.Clock
	events    *util.Events
	recorder  record.EventRecorder
}

// New returns the statefulset controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	ssInf, podInf, pvcInf, revInf := f.Apps().V1().StatefulSets(), f.Core().V1().Pods(), f.Core().V1().PersistentVolumeClaims(), f.Apps().V1().ControllerRevisions()
	c := &Controller{
		client: client, sets: ssInf.Lister(), pods: podInf.Lister(), podInf: podInf.Informer(), claims: pvcInf.Lister(), revisions: revInf.Lister(),
		synced: []cache.InformerSynced{ssInf.Informer().HasSynced, podInf.Informer().HasSynced, pvcInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue:  util.NewQueue("statefulset"), clock: clk,
		events: util.NewEvents(client, "statefulset-controller"),
	}
	c.recorder = c.events
	util.IndexByController(podInf.Informer())
	ssInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	podEvent := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == stsGVK.Kind {
			c.queue.Add(pod.Namespace + "/" + ref.Name)
		}
	}
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podEvent,
		UpdateFunc: func(_, obj any) { podEvent(obj) },
		DeleteFunc: podEvent,
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "statefulset", c.queue, workers, c.Sync, c.synced...)
}

// ordinalOf parses the ordinal from a pod named <set>-<ordinal>, or returns -1.
func ordinalOf(set *appsv1.StatefulSet, pod *corev1.Pod) int {
	suffix, ok := strings.CutPrefix(pod.Name, set.Name+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 0 || strconv.Itoa(n) != suffix {
		return -1
	}
	return n
}

// PodName is the name of the pod with ordinal in set.
func PodName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// ClaimName is the name of the claim from template for the pod with ordinal.
func ClaimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// stsSync is one pass over one StatefulSet.
type stsSync struct {
	c         *Controller
	key       string
	set       *appsv1.StatefulSet
	current   *appsv1.ControllerRevision
	update    *appsv1.ControllerRevision
	templates map[string]*corev1.PodTemplateSpec // by revision name
	now       time.Time
}

// Sync reconciles the StatefulSet named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	set := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	history := util.History{Client: c.client, Lister: c.revisions, Owner: set, OwnerGVK: stsGVK, Selector: sel, Labels: set.Spec.Template.Labels}
	revs, update, err := history.Sync(ctx, &set.Spec.Template, &set.Status.CollisionCount)
	if err != nil {
		return err
	}
	current := update
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			current = r
		}
	}
	s := &stsSync{c: c, key: key, set: set, current: current, update: update, now: c.clock.Now(),
		templates: map[string]*corev1.PodTemplateSpec{update.Name: &set.Spec.Template}}
	if current.Name != update.Name {
		tpl, err := util.TemplateFromRevision(current)
		if err != nil {
			return err
		}
		s.templates[current.Name] = tpl
	}

	all, err := util.ControlledOrOrphans[*corev1.Pod](c.podInf, ns, set.UID)
	if err != nil {
		return err
	}
	var members []*corev1.Pod
	for _, p := range all {
		if ordinalOf(set, p) >= 0 {
			members = append(members, p)
		}
	}
	claimer := util.Claimer{Owner: set, OwnerGVK: stsGVK, Selector: sel, Patch: util.PodPatcher(c.client, ns)}
	pods, claimErr := util.Claim(ctx, claimer, members)

	var errs []error
	if claimErr != nil {
		errs = append(errs, claimErr)
	}
	if set.DeletionTimestamp == nil {
		if err := s.reconcile(ctx, pods); err != nil {
			errs = append(errs, err)
		}
		inUse := map[string]bool{current.Name: true}
		for _, p := range pods {
			inUse[p.Labels[util.ControllerRevisionHashLabel]] = true
		}
		limit := 10
		if set.Spec.RevisionHistoryLimit != nil {
			limit = int(*set.Spec.RevisionHistoryLimit)
		}
		if err := history.Prune(ctx, revs, update, inUse, limit); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.updateStatus(ctx, cached, pods); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *stsSync) replicas() int {
	if s.set.Spec.Replicas == nil {
		return 1
	}
	return int(*s.set.Spec.Replicas)
}

func (s *stsSync) start() int {
	if s.set.Spec.Ordinals == nil {
		return 0
	}
	return int(s.set.Spec.Ordinals.Start)
}

func (s *stsSync) monotonic() bool {
	return s.set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
}

func (s *stsSync) healthy(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
		util.IsPodAvailable(p, s.set.Spec.MinReadySeconds, s.now)
}

func (s *stsSync) requeueForAvailability(p *corev1.Pod) {
	if d := util.AvailableAfter(p, s.set.Spec.MinReadySeconds, s.now); d > 0 {
		s.c.queue.AddAfter(s.key, d)
	}
}

// reconcile brings pods to the wanted set of ordinals, then rolls out the update
// revision. In OrderedReady mode every step waits for the previous pods to be healthy.
func (s *stsSync) reconcile(ctx context.Context, pods []*corev1.Pod) error {
	byOrdinal := map[int]*corev1.Pod{}
	var condemned []*corev1.Pod
	lo, hi := s.start(), s.start()+s.replicas()
	for _, p := range pods {
		o := ordinalOf(s.set, p)
		if o >= lo && o < hi {
			byOrdinal[o] = p
		} else {
			condemned = append(condemned, p)
		}
	}
	sort.Slice(condemned, func(i, j int) bool { return ordinalOf(s.set, condemned[i]) > ordinalOf(s.set, condemned[j]) })

	var errs []error
	allHealthy := true
	for o := lo; o < hi; o++ {
		pod := byOrdinal[o]
		if err := s.reconcileClaims(ctx, o, pod, false); err != nil {
			return err
		}
		switch {
		case pod == nil:
			if err := s.createPod(ctx, o); err != nil {
				errs = append(errs, err)
			}
			allHealthy = false
			if s.monotonic() {
				return errors.Join(errs...)
			}
			continue
		case util.IsPodTerminal(pod) && pod.DeletionTimestamp == nil:
			// A failed or finished pod is replaced under the same identity.
			if err := s.deletePod(ctx, pod); err != nil {
				errs = append(errs, err)
			}
			allHealthy = false
			if s.monotonic() {
				return errors.Join(errs...)
			}
			continue
		}
		if !s.healthy(pod) {
			allHealthy = false
			s.requeueForAvailability(pod)
			if s.monotonic() {
				return errors.Join(errs...)
			}
		}
	}
	// In OrderedReady mode an unhealthy condemned pod is removed only if it is the
	// lowest-ordinal unhealthy one, as upstream: a scale-down with every pod unready
	// halts rather than removing the highest first. (The kept replicas are all healthy
	// here, or the loop above has returned.)
	firstUnhealthy := -1
	for i := len(condemned) - 1; i >= 0; i-- {
		if !s.healthy(condemned[i]) {
			firstUnhealthy = ordinalOf(s.set, condemned[i])
			break
		}
	}
	for _, pod := range condemned {
		if pod.DeletionTimestamp != nil {
			if s.monotonic() {
				return errors.Join(errs...)
			}
			continue
		}
		if s.monotonic() && !allHealthy {
			return errors.Join(errs...)
		}
		if s.monotonic() && !s.healthy(pod) && ordinalOf(s.set, pod) != firstUnhealthy {
			s.requeueForAvailability(pod)
			return errors.Join(errs...)
		}
		if err := s.reconcileClaims(ctx, ordinalOf(s.set, pod), pod, true); err != nil {
			return err
		}
		if err := s.deletePod(ctx, pod); err != nil {
			errs = append(errs, err)
		}
		if s.monotonic() {
			return errors.Join(errs...)
		}
	}
	if len(errs) > 0 || s.set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType || (s.monotonic() && !allHealthy) {
		return errors.Join(errs...)
	}
	return s.rollingUpdate(ctx, byOrdinal, lo, hi)
}

// rollingUpdate replaces pods not yet at the update revision, highest ordinal first,
// down to the partition, keeping at most maxUnavailable of the set's pods unavailable
// (missing, terminating or not yet available count), as upstream: with the default of
// one, pods are replaced one at a time, each waiting for the previous to be available.
func (s *stsSync) rollingUpdate(ctx context.Context, byOrdinal map[int]*corev1.Pod, lo, hi int) error {
	partition := 0
	ru := s.set.Spec.UpdateStrategy.RollingUpdate
	if ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	budget := maxUnavailable(ru, s.replicas())
	for o := lo; o < hi; o++ {
		if pod := byOrdinal[o]; pod == nil || !s.healthy(pod) {
			budget--
		}
	}
	var errs []error
	for o := hi - 1; o >= lo+partition && budget > 0; o-- {
		pod := byOrdinal[o]
		if pod == nil || pod.DeletionTimestamp != nil || pod.Labels[util.ControllerRevisionHashLabel] == s.update.Name {
			continue
		}
		if err := s.deletePod(ctx, pod); err != nil {
			errs = append(errs, err)
		}
		budget--
	}
	return errors.Join(errs...)
}

// maxUnavailable is the RollingUpdate's maxUnavailable for replicas pods (a percentage
// rounds up), at least one; unset means one.
func maxUnavailable(ru *appsv1.RollingUpdateStatefulSetStrategy, replicas int) int {
	if ru == nil || ru.MaxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, replicas, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// revisionFor picks the revision a new pod with ordinal is made from: below the
// partition pods keep the current revision.
func (s *stsSync) revisionFor(ordinal int) *appsv1.ControllerRevision {
	ru := s.set.Spec.UpdateStrategy.RollingUpdate
	if s.set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && ru != nil && ru.Partition != nil &&
		ordinal < s.start()+int(*ru.Partition) {
		return s.current
	}
	return s.update
}

func (s *stsSync) newPod(ordinal int) *corev1.Pod {
	rev := s.revisionFor(ordinal)
	name := PodName(s.set, ordinal)
	pod := util.PodFromTemplate(s.templates[rev.Name], s.set, stsGVK, name, "")
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[PodNameLabel] = name
	pod.Labels[PodIndexLabel] = strconv.Itoa(ordinal)
	pod.Labels[util.ControllerRevisionHashLabel] = rev.Name
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = s.set.Spec.ServiceName
	for _, tpl := range s.set.Spec.VolumeClaimTemplates {
		vol := corev1.Volume{Name: tpl.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: ClaimName(s.set, tpl.Name, ordinal)}}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == tpl.Name {
				pod.Spec.Volumes[i] = vol
				replaced = true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	return pod
}

func (s *stsSync) createPod(ctx context.Context, ordinal int) error {
	if err := s.createClaims(ctx, ordinal); err != nil {
		return err
	}
	pod := s.newPod(ordinal)
	_, err := s.c.client.CoreV1().Pods(s.set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		s.c.recorder.Eventf(s.set, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %s", pod.Name, s.set.Name, err)
		return err
	}
	s.c.recorder.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", pod.Name, s.set.Name)
	return nil
}

func (s *stsSync) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := s.c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		s.c.recorder.Eventf(s.set, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %s", pod.Name, s.set.Name, err)
		return err
	}
	s.c.recorder.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", pod.Name, s.set.Name)
	return nil
}

// createClaims creates the pod's missing PersistentVolumeClaims.
func (s *stsSync) createClaims(ctx context.Context, ordinal int) error {
	for _, tpl := range s.set.Spec.VolumeClaimTemplates {
		name := ClaimName(s.set, tpl.Name, ordinal)
		if existing, err := s.c.claims.PersistentVolumeClaims(s.set.Namespace).Get(name); err == nil {
			if existing.DeletionTimestamp != nil {
				return fmt.Errorf("claim %s is being deleted; waiting before creating pod %s", name, PodName(s.set, ordinal))
			}
			continue
		}
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.set.Namespace, Labels: map[string]string{},
				Annotations: tpl.Annotations},
			Spec: *tpl.Spec.DeepCopy(),
		}
		for k, v := range tpl.Labels {
			claim.Labels[k] = v
		}
		if s.set.Spec.Selector != nil {
			for k, v := range s.set.Spec.Selector.MatchLabels {
				claim.Labels[k] = v
			}
		}
		claim.OwnerReferences = s.claimOwners(nil, nil, false)
		_, err := s.c.client.CoreV1().PersistentVolumeClaims(s.set.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			s.c.recorder.Eventf(s.set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %s", name, PodName(s.set, ordinal), s.set.Name, err)
			return err
		default:
			s.c.recorder.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", name, PodName(s.set, ordinal), s.set.Name)
		}
	}
	return nil
}

func (s *stsSync) retention() appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	if r := s.set.Spec.PersistentVolumeClaimRetentionPolicy; r != nil {
		if r.WhenDeleted != "" {
			p.WhenDeleted = r.WhenDeleted
		}
		if r.WhenScaled != "" {
			p.WhenScaled = r.WhenScaled
		}
	}
	return p
}

// claimOwners returns existing's owner references with the retention policy's applied:
// the set owns claims deleted with it; a condemned pod owns claims deleted on scale
// down (the garbage collector removes them after the pod). Stale references to this set
// or to earlier pods of the ordinal are dropped.
func (s *stsSync) claimOwners(existing []metav1.OwnerReference, pod *corev1.Pod, condemned bool) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range existing {
		isSet := ref.Kind == stsGVK.Kind && ref.Name == s.set.Name
		isPod := ref.Kind == "Pod" && ref.APIVersion == "v1"
		if !isSet && !isPod {
			out = append(out, ref)
		}
	}
	pol := s.retention()
	if pol.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		out = append(out, metav1.OwnerReference{APIVersion: stsGVK.GroupVersion().String(), Kind: stsGVK.Kind, Name: s.set.Name, UID: s.set.UID})
	}
	if condemned && pod != nil && pol.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
	}
	return out
}

// reconcileClaims brings the owner references of an ordinal's existing claims in line
// with the retention policy.
func (s *stsSync) reconcileClaims(ctx context.Context, ordinal int, pod *corev1.Pod, condemned bool) error {
	for _, tpl := range s.set.Spec.VolumeClaimTemplates {
		claim, err := s.c.claims.PersistentVolumeClaims(s.set.Namespace).Get(ClaimName(s.set, tpl.Name, ordinal))
		if err != nil {
			continue
		}
		want := s.claimOwners(claim.OwnerReferences, pod, condemned)
		if apiequality.Semantic.DeepEqual(want, claim.OwnerReferences) || (len(want) == 0 && len(claim.OwnerReferences) == 0) {
			continue
		}
		updated := claim.DeepCopy()
		updated.OwnerReferences = want
		if _, err := s.c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (s *stsSync) updateStatus(ctx context.Context, cached *appsv1.StatefulSet, pods []*corev1.Pod) error {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: s.set.Generation,
		CurrentRevision:    s.current.Name,
		UpdateRevision:     s.update.Name,
		CollisionCount:     s.set.Status.CollisionCount,
		Conditions:         s.set.Status.Conditions,
	}
	for _, p := range pods {
		if p.Status.Phase == "" {
			continue // not yet seen by a kubelet
		}
		st.Replicas++
		if p.Status.Phase == corev1.PodRunning && util.IsPodReady(p) {
			st.ReadyReplicas++
			if util.IsPodAvailable(p, s.set.Spec.MinReadySeconds, s.now) {
				st.AvailableReplicas++
			}
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		switch p.Labels[util.ControllerRevisionHashLabel] {
		case s.current.Name:
			st.CurrentReplicas++
		}
		if p.Labels[util.ControllerRevisionHashLabel] == s.update.Name {
			st.UpdatedReplicas++
		}
	}
	if s.set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas && int(st.Replicas) == s.replicas() {
		// The rollout is complete: the update revision becomes current.
		st.CurrentRevision = st.UpdateRevision
		st.CurrentReplicas = st.UpdatedReplicas
	}
	if apiequality.Semantic.DeepEqual(st, cached.Status) {
		return nil
	}
	set := cached.DeepCopy()
	set.Status = st
	_, err := s.c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{})
	return err
}

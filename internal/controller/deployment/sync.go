package deployment

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/controller/util"
)

// syncer carries one sync of one deployment: d is a private copy whose status
// conditions are edited in memory and written once at the end; rsList are private
// copies of the claimed ReplicaSets, updated in place as they are scaled.
type syncer struct {
	c      *Controller
	d      *appsv1.Deployment
	orig   appsv1.DeploymentStatus
	rsList []*appsv1.ReplicaSet
	now    time.Time
	// revisionPending: d carries a revision annotation the stored deployment lacks,
	// for the sync's status write to store (setDeploymentRevision).
	revisionPending bool
}

func (s *syncer) nowMeta() metav1.Time { return metav1.NewTime(s.now) }

func (s *syncer) replicas() int32 { return replicasOf(s.d.Spec.Replicas) }

// getAllReplicaSets splits rsList into the new ReplicaSet (template equal to d's) and
// the old ones, brings the new one's revision to max(old)+1, and creates it when create
// is set and it does not exist yet.
func (s *syncer) getAllReplicaSets(ctx context.Context, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	newRS := findNewReplicaSet(s.d, s.rsList)
	var oldRSs []*appsv1.ReplicaSet
	for _, rs := range s.rsList {
		if rs != newRS {
			oldRSs = append(oldRSs, rs)
		}
	}
	newRevision := maxRevision(oldRSs) + 1
	switch {
	case newRS != nil:
		if err := s.syncNewRSRevision(ctx, newRS, newRevision); err != nil {
			return nil, nil, err
		}
	case create:
		var err error
		if newRS, err = s.createNewRS(ctx, oldRSs, newRevision); err != nil {
			return nil, nil, err
		}
	default:
		return nil, oldRSs, nil
	}
	s.setDeploymentRevision(newRS.Annotations[RevisionAnnotation])
	return newRS, oldRSs, nil
}

// syncNewRSRevision updates an existing new ReplicaSet: its revision (a rollback makes
// an old one the newest), the deployment's annotations and minReadySeconds.
func (s *syncer) syncNewRSRevision(ctx context.Context, rs *appsv1.ReplicaSet, newRevision int64) error {
	// A shallow copy with annotations of its own is enough: nothing else is changed
	// in place, and the update only encodes it. Most syncs change nothing, and a deep
	// copy of the ReplicaSet on each was ~1.5% of a busy controller-manager's CPU.
	updated := *rs
	updated.Annotations = maps.Clone(rs.Annotations)
	changed := copyDeploymentAnnotations(s.d, &updated)
	changed = setNewRSRevision(&updated, newRevision) || changed
	if updated.Spec.MinReadySeconds != s.d.Spec.MinReadySeconds {
		updated.Spec.MinReadySeconds = s.d.Spec.MinReadySeconds
		changed = true
	}
	if changed {
		got, err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, &updated, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		*rs = *got
	}
	if hasProgressDeadline(s.d) && getCondition(&s.d.Status, appsv1.DeploymentProgressing) == nil {
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewRS,
			fmt.Sprintf("Found new replica set %q", rs.Name), s.nowMeta()))
	}
	return nil
}

func (s *syncer) createNewRS(ctx context.Context, oldRSs []*appsv1.ReplicaSet, newRevision int64) (*appsv1.ReplicaSet, error) {
	d := s.d
	hash := util.ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	template := d.Spec.Template.DeepCopy()
	if template.Labels == nil {
		template.Labels = map[string]string{}
	}
	template.Labels[util.DefaultHashLabelKey] = hash
	selector := d.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[util.DefaultHashLabelKey] = hash
	zero := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(d, deploymentGVK)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: *template},
	}
	copyDeploymentAnnotations(d, rs)
	setNewRSRevision(rs, newRevision)
	n := s.newRSReplicas(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), rs), rs)
	rs.Spec.Replicas = &n
	setReplicasAnnotations(rs, s.replicas(), s.replicas()+maxSurge(d))

	created, err := s.c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		existing, getErr := s.c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, getErr
		}
		if util.IsControlledBy(existing, d) && templatesEqual(&existing.Spec.Template, &d.Spec.Template) {
			// Our own creation from an earlier sync that the cache has not shown yet.
			s.rsList = append(s.rsList, existing)
			return existing, nil
		}
		// A different template hashes to the same name: bump the collision count so the
		// next sync computes another name.
		count := int32(0)
		if d.Status.CollisionCount != nil {
			count = *d.Status.CollisionCount
		}
		count++
		d.Status.CollisionCount = &count
		if _, err := s.c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", errCollision, rs.Name)
	case err != nil:
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate, err.Error(), s.nowMeta()))
			s.writeStatus(ctx, d.Status)
		}
		return nil, err
	}
	logFor(d).Info("created new replica set", "replicaset", created.Name, "replicas", n)
	if n > 0 {
		s.c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	if hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", created.Name), s.nowMeta()))
	}
	s.rsList = append(s.rsList, created)
	return created, nil
}

// setDeploymentRevision mirrors the new ReplicaSet's revision on the deployment, which
// `kubectl rollout history` and `rollout undo` read. The annotation is stored with the
// sync's status write, as upstream's controller stores it (through the status
// subresource, which keeps a deployment's annotations): one write fewer per rollout than
// a write of its own.
func (s *syncer) setDeploymentRevision(rev string) {
	if rev == "" || s.d.Annotations[RevisionAnnotation] == rev {
		return
	}
	if s.d.Annotations == nil {
		s.d.Annotations = map[string]string{}
	}
	s.d.Annotations[RevisionAnnotation] = rev
	s.revisionPending = true
}

// statusToWrite says whether st, or a pending revision, needs a status write.
func (s *syncer) statusToWrite(st appsv1.DeploymentStatus) bool {
	return s.revisionPending || !apiequality.Semantic.DeepEqual(st, s.orig)
}

// newRSReplicas is the size the new ReplicaSet may have now.
func (s *syncer) newRSReplicas(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	want := s.replicas()
	if s.d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return want
	}
	current := sumReplicas(allRSs, specReplicas)
	maxTotal := want + maxSurge(s.d)
	if current >= maxTotal {
		return specReplicas(newRS)
	}
	up := min(maxTotal-current, want-specReplicas(newRS))
	return specReplicas(newRS) + max(up, 0)
}

// scaleReplicaSet sets rs's replicas (and the size annotations) and reports whether
// the size changed.
func (s *syncer) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, newScale int32) (bool, error) {
	updated := rs.DeepCopy()
	sizeChanged := specReplicas(rs) != newScale
	annChanged := setReplicasAnnotations(updated, s.replicas(), s.replicas()+maxSurge(s.d))
	if !sizeChanged && !annChanged {
		return false, nil
	}
	updated.Spec.Replicas = &newScale
	got, err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return false, err
	}
	if sizeChanged {
		direction := "up"
		if newScale < specReplicas(rs) {
			direction = "down"
		}
		logFor(s.d).Info("scaled replica set", "replicaset", rs.Name, "from", specReplicas(rs), "to", newScale)
		s.c.recorder.Eventf(s.d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", direction, rs.Name, specReplicas(rs), newScale)
	}
	*rs = *got
	return sizeChanged, nil
}

func (s *syncer) rolloutRolling(ctx context.Context) error {
	newRS, oldRSs, err := s.getAllReplicaSets(ctx, true)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)

	if scaled, err := s.reconcileNewReplicaSet(ctx, allRSs, newRS); err != nil || scaled {
		return s.afterScale(ctx, allRSs, newRS, err)
	}
	if scaled, err := s.reconcileOldReplicaSets(ctx, allRSs, activeReplicaSets(oldRSs), newRS); err != nil || scaled {
		return s.afterScale(ctx, allRSs, newRS, err)
	}
	if deploymentComplete(s.d, &s.d.Status) {
		if err := s.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return s.syncRolloutStatus(ctx, allRSs, newRS)
}

func (s *syncer) afterScale(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, err error) error {
	if err != nil {
		return err
	}
	return s.syncRolloutStatus(ctx, allRSs, newRS)
}

func (s *syncer) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	want := s.replicas()
	switch cur := specReplicas(newRS); {
	case cur == want:
		return false, nil
	case cur > want:
		return s.scaleReplicaSet(ctx, newRS, want)
	}
	return s.scaleReplicaSet(ctx, newRS, s.newRSReplicas(allRSs, newRS))
}

// reconcileOldReplicaSets scales old ReplicaSets down as far as maxUnavailable allows:
// first their unhealthy pods, then available ones down to replicas-maxUnavailable.
func (s *syncer) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if sumReplicas(oldRSs, specReplicas) == 0 {
		return false, nil
	}
	allPods := sumReplicas(allRSs, specReplicas)
	minAvailable := s.replicas() - maxUnavailable(s.d)
	newRSUnavailable := specReplicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := allPods - minAvailable - newRSUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	sort.SliceStable(oldRSs, func(i, j int) bool { return olderRS(oldRSs[i], oldRSs[j]) })

	// Unhealthy replicas first: removing them costs no availability.
	var cleaned int32
	for _, rs := range oldRSs {
		if cleaned >= maxScaledDown {
			break
		}
		unhealthy := specReplicas(rs) - rs.Status.AvailableReplicas
		if specReplicas(rs) == 0 || unhealthy <= 0 {
			continue
		}
		down := min(maxScaledDown-cleaned, unhealthy)
		if _, err := s.scaleReplicaSet(ctx, rs, specReplicas(rs)-down); err != nil {
			return false, err
		}
		cleaned += down
	}

	// Then available replicas, keeping minAvailable. A set just scaled down may still
	// report the available pods it had before (its controller has not deleted them
	// yet); at most its spec's worth of them stay, so that is what counts.
	var scaled int32
	available := sumReplicas(allRSs, func(rs *appsv1.ReplicaSet) int32 { return min(availableReplicas(rs), specReplicas(rs)) })
	if available > minAvailable {
		total := available - minAvailable
		for _, rs := range oldRSs {
			if scaled >= total {
				break
			}
			if specReplicas(rs) == 0 {
				continue
			}
			down := min(specReplicas(rs), total-scaled)
			if _, err := s.scaleReplicaSet(ctx, rs, specReplicas(rs)-down); err != nil {
				return false, err
			}
			scaled += down
		}
	}
	return cleaned+scaled > 0, nil
}

func (s *syncer) rolloutRecreate(ctx context.Context) error {
	newRS, oldRSs, err := s.getAllReplicaSets(ctx, false)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledDown := false
	for _, rs := range activeReplicaSets(oldRSs) {
		scaled, err := s.scaleReplicaSet(ctx, rs, 0)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return s.syncRolloutStatus(ctx, allRSs, newRS)
	}
	running, err := s.c.oldPodsRunning(s.d.Namespace, newRS, oldRSs)
	if err != nil {
		return err
	}
	if running {
		return s.syncRolloutStatus(ctx, allRSs, newRS)
	}
	if newRS == nil {
		if newRS, oldRSs, err = s.getAllReplicaSets(ctx, true); err != nil {
			return err
		}
		allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	}
	if _, err := s.scaleReplicaSet(ctx, newRS, s.replicas()); err != nil {
		return err
	}
	if deploymentComplete(s.d, &s.d.Status) {
		if err := s.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return s.syncRolloutStatus(ctx, allRSs, newRS)
}

// isScalingEvent: some active ReplicaSet was sized for a different replicas count.
func (s *syncer) isScalingEvent() bool {
	for _, rs := range activeReplicaSets(s.rsList) {
		v, ok := rs.Annotations[DesiredReplicasAnnotation]
		if !ok {
			continue
		}
		if desired, err := strconv.Atoi(v); err == nil && int32(desired) != s.replicas() {
			return true
		}
	}
	return false
}

// syncScaleAndStatus handles paused deployments and scaling events: resize without
// rolling anything out.
func (s *syncer) syncScaleAndStatus(ctx context.Context) error {
	newRS, oldRSs, err := s.getAllReplicaSets(ctx, false)
	if err != nil {
		return err
	}
	if err := s.scale(ctx, newRS, oldRSs); err != nil {
		return err
	}
	if s.d.Spec.Paused {
		if err := s.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return s.writeStatusIfChanged(ctx, s.calculateStatus(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS), newRS))
}

func (s *syncer) syncStatusOnly(ctx context.Context) error {
	newRS, oldRSs, err := s.getAllReplicaSets(ctx, false)
	if err != nil {
		return err
	}
	return s.writeStatusIfChanged(ctx, s.calculateStatus(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS), newRS))
}

// scale resizes the ReplicaSets to a new replicas count: the only active one directly,
// otherwise proportionally to their sizes (a scale in the middle of a rollout).
func (s *syncer) scale(ctx context.Context, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		_, err := s.scaleReplicaSet(ctx, rs, s.replicas())
		return err
	}
	if s.isSaturated(newRS) {
		for _, rs := range activeReplicaSets(oldRSs) {
			if _, err := s.scaleReplicaSet(ctx, rs, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if s.d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return nil
	}
	all := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	allowed := s.replicas()
	if allowed > 0 {
		allowed += maxSurge(s.d)
	}
	toAdd := allowed - sumReplicas(all, specReplicas)
	if toAdd > 0 {
		// Larger first; among equals, newer first when growing.
		sort.SliceStable(all, func(i, j int) bool {
			if specReplicas(all[i]) != specReplicas(all[j]) {
				return specReplicas(all[i]) > specReplicas(all[j])
			}
			return olderRS(all[j], all[i])
		})
	} else {
		sort.SliceStable(all, func(i, j int) bool {
			if specReplicas(all[i]) != specReplicas(all[j]) {
				return specReplicas(all[i]) > specReplicas(all[j])
			}
			return olderRS(all[i], all[j])
		})
	}
	sizes := map[string]int32{}
	var added int32
	for _, rs := range all {
		sizes[rs.Name] = specReplicas(rs)
		if toAdd == 0 || added == toAdd {
			continue
		}
		p := s.proportion(rs, toAdd-added)
		sizes[rs.Name] += p
		added += p
	}
	if leftover := toAdd - added; leftover != 0 && len(all) > 0 {
		sizes[all[0].Name] = max(sizes[all[0].Name]+leftover, 0)
	}
	for _, rs := range all {
		if _, err := s.scaleReplicaSet(ctx, rs, sizes[rs.Name]); err != nil {
			return err
		}
	}
	return nil
}

// proportion is rs's share of a resize, bounded by what is still allowed.
func (s *syncer) proportion(rs *appsv1.ReplicaSet, allowed int32) int32 {
	var fraction int32
	if s.replicas() == 0 {
		fraction = -specReplicas(rs)
	} else {
		target := float64(s.replicas() + maxSurge(s.d))
		annotated := s.d.Status.Replicas
		if v, err := strconv.Atoi(rs.Annotations[MaxReplicasAnnotation]); err == nil {
			annotated = int32(v)
		}
		if annotated == 0 {
			return 0
		}
		fraction = int32(math.Round(float64(specReplicas(rs))*target/float64(annotated))) - specReplicas(rs)
	}
	if allowed > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	active := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	switch len(active) {
	case 1:
		return active[0]
	case 0:
		if newRS != nil {
			return newRS
		}
		var latest *appsv1.ReplicaSet
		for _, rs := range oldRSs {
			if latest == nil || olderRS(latest, rs) {
				latest = rs
			}
		}
		return latest
	}
	return nil
}

func (s *syncer) isSaturated(rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	return err == nil && specReplicas(rs) == s.replicas() && int32(desired) == s.replicas() &&
		rs.Status.AvailableReplicas == s.replicas()
}

// cleanup deletes the oldest scaled-down ReplicaSets beyond revisionHistoryLimit.
func (s *syncer) cleanup(ctx context.Context, oldRSs []*appsv1.ReplicaSet) error {
	if s.d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := len(alive) - int(*s.d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(alive, func(i, j int) bool {
		if revision(alive[i]) != revision(alive[j]) {
			return revision(alive[i]) < revision(alive[j])
		}
		return olderRS(alive[i], alive[j])
	})
	for _, rs := range alive {
		if diff == 0 {
			break
		}
		if rs.Status.Replicas != 0 || specReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		diff--
	}
	return nil
}

// checkPausedCondition records a pause or resume in the Progressing condition, which
// stops (or restarts) the progress deadline clock.
func (s *syncer) checkPausedCondition() {
	if !hasProgressDeadline(s.d) {
		return
	}
	cond := getCondition(&s.d.Status, appsv1.DeploymentProgressing)
	pausedCond := cond != nil && cond.Reason == ReasonPaused
	switch {
	case s.d.Spec.Paused && !pausedCond:
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", s.nowMeta()))
	case !s.d.Spec.Paused && pausedCond:
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", s.nowMeta()))
	}
}

func (s *syncer) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	var live []*appsv1.ReplicaSet
	for _, rs := range allRSs {
		if rs != nil {
			live = append(live, rs)
		}
	}
	available := sumReplicas(live, availableReplicas)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  s.d.Generation,
		Replicas:            sumReplicas(live, statusReplicas),
		ReadyReplicas:       sumReplicas(live, readyReplicas),
		AvailableReplicas:   available,
		UnavailableReplicas: max(sumReplicas(live, specReplicas)-available, 0),
		CollisionCount:      s.d.Status.CollisionCount,
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.Conditions = append(st.Conditions, s.d.Status.Conditions...)
	if available >= s.replicas()-maxUnavailable(s.d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", s.nowMeta()))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", s.nowMeta()))
	}
	// Surface a ReplicaSet's failure to create pods (quota, admission) on the deployment.
	failure := false
	for _, rs := range live {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				setCondition(&st, newCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, c.Reason, c.Message, s.nowMeta()))
				failure = true
			}
		}
	}
	if !failure {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	return st
}

// syncRolloutStatus computes status and the Progressing condition of a rollout.
func (s *syncer) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	st := s.calculateStatus(allRSs, newRS)
	if !hasProgressDeadline(s.d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := getCondition(&st, appsv1.DeploymentProgressing)
	if hasProgressDeadline(s.d) && (cur == nil || cur.Reason != ReasonTimedOut) {
		subject := fmt.Sprintf("Deployment %q", s.d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case deploymentComplete(s.d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable,
				subject+" has successfully progressed.", s.nowMeta()))
		case deploymentProgressing(s.d, &st):
			// Progress restarts the deadline clock: lastUpdateTime moves on every step.
			cond := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, subject+" is progressing.", s.nowMeta())
			if cur != nil && cur.Status == corev1.ConditionTrue {
				cond.LastTransitionTime = cur.LastTransitionTime
			}
			removeCondition(&st, appsv1.DeploymentProgressing)
			st.Conditions = append(st.Conditions, cond)
		case s.timedOut(&st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut,
				subject+" has timed out progressing.", s.nowMeta()))
		}
	}
	if !s.statusToWrite(st) {
		s.requeueStuck(&st)
		return nil
	}
	if err := s.writeStatus(ctx, st); err != nil {
		return err
	}
	s.requeueStuck(&st)
	return nil
}

func (s *syncer) timedOut(st *appsv1.DeploymentStatus) bool {
	cond := getCondition(st, appsv1.DeploymentProgressing)
	if cond == nil || cond.Reason == ReasonNewRSAvailable {
		return false
	}
	if cond.Reason == ReasonTimedOut {
		return true
	}
	deadline := time.Duration(*s.d.Spec.ProgressDeadlineSeconds) * time.Second
	return cond.LastUpdateTime.Add(deadline).Before(s.now)
}

// requeueStuck checks the deployment again when its progress deadline would pass.
func (s *syncer) requeueStuck(st *appsv1.DeploymentStatus) {
	if !hasProgressDeadline(s.d) || deploymentComplete(s.d, st) {
		return
	}
	cond := getCondition(st, appsv1.DeploymentProgressing)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason == ReasonNewRSAvailable {
		return
	}
	deadline := time.Duration(*s.d.Spec.ProgressDeadlineSeconds) * time.Second
	s.c.requeueAfter(s.d, cond.LastUpdateTime.Add(deadline).Sub(s.now)+time.Second)
}

func (s *syncer) writeStatusIfChanged(ctx context.Context, st appsv1.DeploymentStatus) error {
	if !s.statusToWrite(st) {
		return nil
	}
	return s.writeStatus(ctx, st)
}

func (s *syncer) writeStatus(ctx context.Context, st appsv1.DeploymentStatus) error {
	d := s.d.DeepCopy()
	d.Status = st
	got, err := s.c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	s.d = got
	s.orig = got.Status
	s.revisionPending = false
	return nil
}

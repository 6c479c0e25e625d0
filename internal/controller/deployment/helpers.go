package deployment

import (
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"mizzen/internal/controller/util"
)

// Annotations the controller keeps on Deployments and ReplicaSets, as upstream.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	lastAppliedAnnotation     = "kubectl.kubernetes.io/last-applied-configuration"
	rollbackToAnnotation      = "deprecated.deployment.rollback.to"
)

// Progressing condition reasons, as upstream reports them and kubectl reads them.
const (
	ReasonNewRSCreated       = "NewReplicaSetCreated"
	ReasonFoundNewRS         = "FoundNewReplicaSet"
	ReasonNewRSAvailable     = "NewReplicaSetAvailable"
	ReasonReplicaSetUpdated  = "ReplicaSetUpdated"
	ReasonTimedOut           = "ProgressDeadlineExceeded"
	ReasonPaused             = "DeploymentPaused"
	ReasonResumed            = "DeploymentResumed"
	ReasonMinimumAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable = "MinimumReplicasUnavailable"
	ReasonFailedRSCreate     = "ReplicaSetCreateError"
)

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// resolveFenceposts turns maxSurge (rounded up) and maxUnavailable (rounded down) into
// pod counts; both zero would deadlock, so maxUnavailable becomes 1.
func resolveFenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.Type != "" {
		return 0, 0
	}
	desired := int(replicasOf(d.Spec.Replicas))
	ms, mu := intstr.FromString("25%"), intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = *ru.MaxUnavailable
		}
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(&ms, desired, true)
	if err != nil {
		s = 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(&mu, desired, false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

func maxSurge(d *appsv1.Deployment) int32 {
	s, _ := resolveFenceposts(d)
	return s
}

// maxUnavailable is how many of the desired pods may be unavailable during a rollout.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType || replicasOf(d.Spec.Replicas) == 0 {
		return 0
	}
	_, u := resolveFenceposts(d)
	return min(u, replicasOf(d.Spec.Replicas))
}

// templatesEqual compares two pod templates ignoring the pod-template-hash label
// (and so an empty label map equals none), as upstream's EqualIgnoreHash, without
// copying either template: it runs for every ReplicaSet of every sync.
func templatesEqual(a, b *corev1.PodTemplateSpec) bool {
	if !labelsEqualIgnoringHash(a.Labels, b.Labels) {
		return false
	}
	am, bm := a.ObjectMeta, b.ObjectMeta // shallow: only Labels is replaced
	am.Labels, bm.Labels = nil, nil
	return apiequality.Semantic.DeepEqual(&am, &bm) && apiequality.Semantic.DeepEqual(&a.Spec, &b.Spec)
}

// labelsEqualIgnoringHash reports whether a and b hold the same labels besides the
// pod-template-hash one.
func labelsEqualIgnoringHash(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if k == util.DefaultHashLabelKey {
			continue
		}
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
		n++
	}
	if _, ok := b[util.DefaultHashLabelKey]; ok {
		n++
	}
	return n == len(b)
}

// findNewReplicaSet returns the oldest ReplicaSet whose template equals d's.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rsList...)
	sort.SliceStable(sorted, func(i, j int) bool { return olderRS(sorted[i], sorted[j]) })
	for _, rs := range sorted {
		if templatesEqual(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

func olderRS(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

func revision(obj metav1.Object) int64 {
	v, err := strconv.ParseInt(obj.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(rsList []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rsList {
		m = max(m, revision(rs))
	}
	return m
}

func sumReplicas(rsList []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rsList {
		if rs != nil {
			n += f(rs)
		}
	}
	return n
}

func specReplicas(rs *appsv1.ReplicaSet) int32      { return replicasOf(rs.Spec.Replicas) }
func statusReplicas(rs *appsv1.ReplicaSet) int32    { return rs.Status.Replicas }
func readyReplicas(rs *appsv1.ReplicaSet) int32     { return rs.Status.ReadyReplicas }
func availableReplicas(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas }

// activeReplicaSets are those with replicas wanted.
func activeReplicaSets(rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if rs != nil && specReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// setReplicasAnnotations records on rs the deployment size it was scaled for; the
// proportional scaler reads it back. It reports whether anything changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]string{DesiredReplicasAnnotation: strconv.Itoa(int(desired)), MaxReplicasAnnotation: strconv.Itoa(int(maxReplicas))} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// copyDeploymentAnnotations copies the user's annotations of d (change-cause and the
// like) onto rs, leaving out those the controller owns. It reports a change.
func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range d.Annotations {
		switch k {
		case lastAppliedAnnotation, RevisionAnnotation, RevisionHistoryAnnotation, DesiredReplicasAnnotation, MaxReplicasAnnotation, rollbackToAnnotation:
			continue
		}
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// setNewRSRevision gives rs the revision newRevision, remembering any older one it had
// in the revision-history annotation (a rollback reuses an old ReplicaSet).
func setNewRSRevision(rs *appsv1.ReplicaSet, newRevision int64) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	old := revision(rs)
	if old >= newRevision {
		return false
	}
	if prev := rs.Annotations[RevisionAnnotation]; prev != "" {
		history := rs.Annotations[RevisionHistoryAnnotation]
		if history == "" {
			history = prev
		} else {
			history = strings.Join([]string{history, prev}, ",")
		}
		rs.Annotations[RevisionHistoryAnnotation] = history
	}
	rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
	return true
}

func getCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition puts cond into st, keeping lastTransitionTime when the status did not
// change, and leaving st alone when nothing but timestamps would change.
func setCondition(st *appsv1.DeploymentStatus, cond appsv1.DeploymentCondition) {
	if cur := getCondition(st, cond.Type); cur != nil {
		if cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
			return
		}
		if cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
	}
	removeCondition(st, cond.Type)
	st.Conditions = append(st.Conditions, cond)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

func newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now metav1.Time) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete: every desired pod is updated and available, and nothing older is left.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	want := replicasOf(d.Spec.Replicas)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want &&
		st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: the new status moved the rollout forward compared to d's.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	oldOld := old.Replicas - old.UpdatedReplicas
	newOld := st.Replicas - st.UpdatedReplicas
	return st.UpdatedReplicas > old.UpdatedReplicas || newOld < oldOld ||
		st.ReadyReplicas > old.ReadyReplicas || st.AvailableReplicas > old.AvailableReplicas
}

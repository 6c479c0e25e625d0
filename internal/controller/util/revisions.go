package util

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// ControllerRevisionHashLabel names, on pods and ControllerRevisions, the revision of
// the template a pod was made from.
const ControllerRevisionHashLabel = appsv1.ControllerRevisionHashLabelKey

// TemplatePatch is what a DaemonSet or StatefulSet ControllerRevision stores: a strategic
// merge patch replacing spec.template, which `kubectl rollout undo` applies back.
func TemplatePatch(template *corev1.PodTemplateSpec) (runtime.RawExtension, error) {
	raw, err := json.Marshal(template)
	if err != nil {
		return runtime.RawExtension{}, err
	}
	var tpl map[string]any
	if err := json.Unmarshal(raw, &tpl); err != nil {
		return runtime.RawExtension{}, err
	}
	tpl["$patch"] = "replace"
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	if err != nil {
		return runtime.RawExtension{}, err
	}
	return runtime.RawExtension{Raw: data}, nil
}

// RevisionHash names a revision's data, with a non-zero collision count mixed in.
func RevisionHash(data []byte, collisionCount int32) string {
	h := fnv.New32a()
	h.Write(data)
	if collisionCount > 0 {
		h.Write([]byte(strconv.Itoa(int(collisionCount))))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// SameRevisionData compares two revisions' data as JSON values.
func SameRevisionData(a, b runtime.RawExtension) bool {
	var x, y any
	if json.Unmarshal(a.Raw, &x) != nil || json.Unmarshal(b.Raw, &y) != nil {
		return false
	}
	return apiequality.Semantic.DeepEqual(x, y)
}

// History manages the ControllerRevisions of one DaemonSet or StatefulSet.
type History struct {
	Client   kubernetes.Interface
	Lister   appslisters.ControllerRevisionLister
	Owner    metav1.Object
	OwnerGVK schema.GroupVersionKind
	Selector labels.Selector
	// Labels are put on new revisions (the template's labels).
	Labels map[string]string
}

// List returns the owner's revisions (adopting matching orphans), oldest revision first.
func (h History) List(ctx context.Context) ([]*appsv1.ControllerRevision, error) {
	all, err := h.Lister.ControllerRevisions(h.Owner.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	claimer := Claimer{Owner: h.Owner, OwnerGVK: h.OwnerGVK, Selector: h.Selector,
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := h.Client.AppsV1().ControllerRevisions(h.Owner.GetNamespace()).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		}}
	revs, err := Claim(ctx, claimer, all)
	sort.SliceStable(revs, func(i, j int) bool {
		if revs[i].Revision != revs[j].Revision {
			return revs[i].Revision < revs[j].Revision
		}
		return revs[i].Name < revs[j].Name
	})
	return revs, err
}

// Current returns the revision holding data, creating it with the next revision
// number, or renumbering an older one to be the newest (a rollback). *collisionCount
// (the owner's status.collisionCount; must not be nil) is raised when a revision of
// other content already holds the computed name; the caller persists it.
func (h History) Current(ctx context.Context, revs []*appsv1.ControllerRevision, data runtime.RawExtension, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	var maxRev int64
	var match *appsv1.ControllerRevision
	for _, r := range revs {
		maxRev = max(maxRev, r.Revision)
		if SameRevisionData(r.Data, data) {
			match = r
		}
	}
	if match != nil {
		if match.Revision == maxRev {
			return match, nil
		}
		updated := match.DeepCopy()
		updated.Revision = maxRev + 1
		return h.Client.AppsV1().ControllerRevisions(updated.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	}
	for {
		hash := RevisionHash(data.Raw, *collisionCount)
		lbls := map[string]string{}
		for k, v := range h.Labels {
			lbls[k] = v
		}
		lbls[ControllerRevisionHashLabel] = hash
		rev := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name:            h.Owner.GetName() + "-" + hash,
				Namespace:       h.Owner.GetNamespace(),
				Labels:          lbls,
				OwnerReferences: []metav1.OwnerReference{*NewControllerRef(h.Owner, h.OwnerGVK)},
			},
			Data:     data,
			Revision: maxRev + 1,
		}
		created, err := h.Client.AppsV1().ControllerRevisions(rev.Namespace).Create(ctx, rev, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		existing, getErr := h.Client.AppsV1().ControllerRevisions(rev.Namespace).Get(ctx, rev.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, getErr
		}
		if IsControlledBy(existing, h.Owner) && SameRevisionData(existing.Data, data) {
			return existing, nil
		}
		// Same name, other content: a hash collision. Try the next name.
		*collisionCount++
	}
}

// Prune deletes the oldest revisions beyond limit that no live pod uses (inUse holds
// the revision hashes on pods) and that are not current.
func (h History) Prune(ctx context.Context, revs []*appsv1.ControllerRevision, current *appsv1.ControllerRevision, inUse map[string]bool, limit int) error {
	var candidates []*appsv1.ControllerRevision
	for _, r := range revs {
		if r.Name == current.Name || inUse[r.Labels[ControllerRevisionHashLabel]] || inUse[r.Name] {
			continue
		}
		candidates = append(candidates, r)
	}
	for i := 0; i < len(candidates)-limit; i++ {
		err := h.Client.AppsV1().ControllerRevisions(h.Owner.GetNamespace()).Delete(ctx, candidates[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// TemplateFromRevision reads back the pod template a revision made by TemplatePatch holds.
func TemplateFromRevision(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	delete(data.Spec.Template, "$patch")
	raw, err := json.Marshal(data.Spec.Template)
	if err != nil {
		return nil, err
	}
	var tpl corev1.PodTemplateSpec
	if err := json.Unmarshal(raw, &tpl); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	return &tpl, nil
}

// Sync lists the owner's revisions and finds or makes the one for template, counting
// hash collisions in *collisionCount (set when it becomes non-zero): the first step of
// every controller that keeps ControllerRevision history (daemonset, statefulset).
func (h History) Sync(ctx context.Context, template *corev1.PodTemplateSpec, collisionCount **int32) ([]*appsv1.ControllerRevision, *appsv1.ControllerRevision, error) {
	revs, err := h.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	data, err := TemplatePatch(template)
	if err != nil {
		return nil, nil, err
	}
	collisions := int32(0)
	if *collisionCount != nil {
		collisions = **collisionCount
	}
	current, err := h.Current(ctx, revs, data, &collisions)
	if err != nil {
		return nil, nil, err
	}
	if collisions > 0 {
		*collisionCount = &collisions
	}
	return revs, current, nil
}

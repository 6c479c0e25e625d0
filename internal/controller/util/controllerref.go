package util

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// NewControllerRef returns an owner reference that marks owner as the managing
// controller of an object: controller=true and blockOwnerDeletion=true, so a foreground
// deletion of owner waits for the object.
func NewControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// IsControlledBy reports whether obj's controller reference points at owner's UID.
func IsControlledBy(obj metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// PatchFunc sends a strategic merge patch for the object named name.
type PatchFunc func(ctx context.Context, name string, patch []byte) error

// Claimer decides which objects of a kind belong to one owner: those it controls and
// that still match its selector; orphans that match are adopted, and controlled objects
// that no longer match are released.
type Claimer struct {
	Owner    metav1.Object
	OwnerGVK schema.GroupVersionKind
	Selector labels.Selector
	Patch    PatchFunc
}

// Claim returns the objects of candidates that belong to the owner after adopting and
// releasing as needed. Objects controlled by someone else are ignored. Errors of
// individual patches are joined; an object that vanished is simply not claimed.
func Claim[T metav1.Object](ctx context.Context, c Claimer, candidates []T) ([]T, error) {
	var claimed []T
	var errs []error
	for _, obj := range candidates {
		ref := metav1.GetControllerOf(obj)
		matches := c.Selector.Matches(labels.Set(obj.GetLabels()))
		switch {
		case ref != nil && ref.UID != c.Owner.GetUID():
			continue
		case ref != nil:
			if matches {
				claimed = append(claimed, obj)
				continue
			}
			if c.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.Patch(ctx, obj.GetName(), ReleasePatch(c.Owner.GetUID(), obj.GetUID())); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("release %s: %w", obj.GetName(), err))
			}
		default:
			if !matches || c.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.Patch(ctx, obj.GetName(), AdoptPatch(c.Owner, c.OwnerGVK, obj.GetUID())); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopt %s: %w", obj.GetName(), err))
				}
				continue
			}
			claimed = append(claimed, obj)
		}
	}
	return claimed, errors.Join(errs...)
}

// AdoptPatch is the strategic merge patch that adds owner as controller of the object
// with uid objUID (the uid precondition makes it fail on a recreated namesake).
func AdoptPatch(owner metav1.Object, gvk schema.GroupVersionKind, objUID types.UID) []byte {
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"ownerReferences": []any{NewControllerRef(owner, gvk)},
			"uid":             objUID,
		},
	})
	return b
}

// ReleasePatch is the strategic merge patch that removes the owner reference with
// ownerUID from the object with uid objUID.
func ReleasePatch(ownerUID, objUID types.UID) []byte {
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"ownerReferences": []any{map[string]any{"$patch": "delete", "uid": ownerUID}},
			"uid":             objUID,
		},
	})
	return b
}

// PodPatcher returns a PatchFunc for pods in namespace ns.
func PodPatcher(client kubernetes.Interface, ns string) PatchFunc {
	return func(ctx context.Context, name string, patch []byte) error {
		_, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}

// PodFromTemplate builds a pod for owner from template: labels, annotations, finalizers
// and spec copied, the controller reference set, and the name left to generateName when
// name is empty.
func PodFromTemplate(template *corev1.PodTemplateSpec, owner metav1.Object, gvk schema.GroupVersionKind, name, generateName string) *corev1.Pod {
	t := template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:         name,
			GenerateName: generateName,
			Namespace:    owner.GetNamespace(),
			Labels:       t.Labels,
			Annotations:  t.Annotations,
			Finalizers:   t.Finalizers,
		},
		Spec: t.Spec,
	}
	if name != "" {
		pod.GenerateName = ""
	}
	pod.OwnerReferences = []metav1.OwnerReference{*NewControllerRef(owner, gvk)}
	return pod
}

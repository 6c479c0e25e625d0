package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// replicated is the common view of a ReplicaSet or a ReplicationController: all the
// controller needs to keep N copies of a pod template running.
type replicated struct {
	metav1.Object
	replicas        int32
	minReadySeconds int32
	selector        labels.Selector
	template        *corev1.PodTemplateSpec
	status          appsv1.ReplicaSetStatus
}

// runtimeObject is the ReplicaSet or ReplicationController itself, for Events.
func (r *replicated) runtimeObject() runtime.Object { return r.Object.(runtime.Object) }

// kind adapts one API kind to the shared controller.
type kind interface {
	gvk() schema.GroupVersionKind
	informer() cache.SharedIndexInformer
	get(ns, name string) (*replicated, error)
	// object is the owner as the lister holds it, for what needs only its metadata:
	// get also parses its selector, which a pod event does not need.
	object(ns, name string) (metav1.Object, error)
	list(ns string) ([]*replicated, error)
	updateStatus(ctx context.Context, r *replicated, status appsv1.ReplicaSetStatus) error
}

type replicaSetKind struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister appslisters.ReplicaSetLister
}

func newReplicaSetKind(client kubernetes.Interface, f informers.SharedInformerFactory) *replicaSetKind {
	i := f.Apps().V1().ReplicaSets()
	return &replicaSetKind{client: client, inf: i.Informer(), lister: i.Lister()}
}

func (k *replicaSetKind) gvk() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
}
func (k *replicaSetKind) informer() cache.SharedIndexInformer { return k.inf }

func (k *replicaSetKind) get(ns, name string) (*replicated, error) {
	rs, err := k.lister.ReplicaSets(ns).Get(name)
	if err != nil {
		return nil, err
	}
	return fromReplicaSet(rs)
}

func (k *replicaSetKind) object(ns, name string) (metav1.Object, error) {
	return k.lister.ReplicaSets(ns).Get(name)
}

func (k *replicaSetKind) list(ns string) ([]*replicated, error) {
	all, err := k.lister.ReplicaSets(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*replicated
	for _, rs := range all {
		if r, err := fromReplicaSet(rs); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func fromReplicaSet(rs *appsv1.ReplicaSet) (*replicated, error) {
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil, err
	}
	replicas := int32(1)
	if rs.Spec.Replicas != nil {
		replicas = *rs.Spec.Replicas
	}
	return &replicated{Object: rs, replicas: replicas, minReadySeconds: rs.Spec.MinReadySeconds,
		selector: sel, template: &rs.Spec.Template, status: rs.Status}, nil
}

func (k *replicaSetKind) updateStatus(ctx context.Context, r *replicated, status appsv1.ReplicaSetStatus) error {
	rs := r.Object.(*appsv1.ReplicaSet).DeepCopy()
	rs.Status = status
	_, err := k.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	return err
}

type rcKind struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister corelisters.ReplicationControllerLister
}

func newRCKind(client kubernetes.Interface, f informers.SharedInformerFactory) *rcKind {
	i := f.Core().V1().ReplicationControllers()
	return &rcKind{client: client, inf: i.Informer(), lister: i.Lister()}
}

func (k *rcKind) gvk() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("ReplicationController")
}
func (k *rcKind) informer() cache.SharedIndexInformer { return k.inf }

func (k *rcKind) get(ns, name string) (*replicated, error) {
	rc, err := k.lister.ReplicationControllers(ns).Get(name)
	if err != nil {
		return nil, err
	}
	return fromRC(rc), nil
}

func (k *rcKind) object(ns, name string) (metav1.Object, error) {
	return k.lister.ReplicationControllers(ns).Get(name)
}

func (k *rcKind) list(ns string) ([]*replicated, error) {
	all, err := k.lister.ReplicationControllers(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*replicated, 0, len(all))
	for _, rc := range all {
		out = append(out, fromRC(rc))
	}
	return out, nil
}

func fromRC(rc *corev1.ReplicationController) *replicated {
	replicas := int32(1)
	if rc.Spec.Replicas != nil {
		replicas = *rc.Spec.Replicas
	}
	// An RC's selector is a plain map; an empty one matches nothing rather than everything.
	sel := labels.Nothing()
	if len(rc.Spec.Selector) > 0 {
		sel = labels.SelectorFromSet(rc.Spec.Selector)
	}
	st := appsv1.ReplicaSetStatus{
		Replicas:             rc.Status.Replicas,
		FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
		ReadyReplicas:        rc.Status.ReadyReplicas,
		AvailableReplicas:    rc.Status.AvailableReplicas,
		ObservedGeneration:   rc.Status.ObservedGeneration,
	}
	for _, c := range rc.Status.Conditions {
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return &replicated{Object: rc, replicas: replicas, minReadySeconds: rc.Spec.MinReadySeconds,
		selector: sel, template: rc.Spec.Template, status: st}
}

func (k *rcKind) updateStatus(ctx context.Context, r *replicated, status appsv1.ReplicaSetStatus) error {
	rc := r.Object.(*corev1.ReplicationController).DeepCopy()
	rc.Status = corev1.ReplicationControllerStatus{
		Replicas:             status.Replicas,
		FullyLabeledReplicas: status.FullyLabeledReplicas,
		ReadyReplicas:        status.ReadyReplicas,
		AvailableReplicas:    status.AvailableReplicas,
		ObservedGeneration:   status.ObservedGeneration,
	}
	for _, c := range status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	_, err := k.client.CoreV1().ReplicationControllers(rc.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
	return err
}

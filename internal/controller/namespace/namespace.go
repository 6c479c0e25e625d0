// Package namespace finishes the deletion of Terminating namespaces: it deletes every
// namespaced object of every resource the apiserver serves (found through discovery,
// so new resource types are covered), reports progress in the namespace's status
// conditions, and when nothing is left removes the "kubernetes" finalizer through the
// namespaces/finalize subresource so the apiserver can remove the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "namespace"

// recheckAfter is how soon a namespace whose content is still going away (pods in
// their grace period, objects with finalizers) is looked at again.
const recheckAfter = 3 * time.Second

// Controller empties terminating namespaces; its queue holds namespace names.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller on the namespace informer. The metadata client deletes
// objects of any resource; discovery says which resources exist.
func New(client kubernetes.Interface, metadataClient metadata.Interface, disc discovery.DiscoveryInterface, namespaces coreinformers.NamespaceInformer) *Controller {
	c := &Controller{
		client:    client,
		metadata:  metadataClient,
		discovery: disc,
		synced:    namespaces.Informer().HasSynced,
		queue:     util.NewQueue(Name),
	}
	enqueueTerminating := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueTerminating,
		UpdateFunc: func(_, cur any) { enqueueTerminating(cur) },
	})
	return c
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced)
}

// sync deletes what is left in a terminating namespace and finalizes it when empty.
func (c *Controller) sync(ctx context.Context, name string) error {
	// A live read: acting on a stale cached copy could finalize a namespace whose
	// deletion was already completed, or miss a just-set deletionTimestamp.
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}

	report, deleteErr := c.deleteContent(ctx, ns.Name)
	if err := c.updateStatus(ctx, ns, report.conditions()); err != nil {
		return err
	}
	if deleteErr != nil {
		return deleteErr
	}
	if report.remaining() {
		return util.RequeueAfter(recheckAfter, "content of namespace "+name+" is still being removed")
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	slog.InfoContext(ctx, "namespace emptied and finalized", "namespace", name)
	return nil
}

// contentReport is what one pass over a namespace's content found.
type contentReport struct {
	discoveryErr     error
	deleteErrs       []error
	remainingByGR    map[string]int // "pods", "widgets.example.com" -> objects left
	remainingByFinal map[string]int // finalizer -> objects carrying it
}

func (r *contentReport) remaining() bool { return len(r.remainingByGR) > 0 }

// deleteContent deletes every object in the namespace, in the background propagation
// mode, and counts what is still there afterwards.
func (c *Controller) deleteContent(ctx context.Context, namespace string) (*contentReport, error) {
	r := &contentReport{remainingByGR: map[string]int{}, remainingByFinal: map[string]int{}}
	resources, err := util.DiscoverResources(c.discovery, "list", "delete")
	if err != nil {
		r.discoveryErr = err
		if !discovery.IsGroupDiscoveryFailedError(err) {
			return r, fmt.Errorf("discover resources: %w", err)
		}
	}
	background := metav1.DeletePropagationBackground
	// Pods go first, and nothing else goes while one is left (upstream's ordered namespace
	// deletion, GA in 1.34): a pod still running keeps the network policies, secrets and
	// config maps it was given until it has stopped.
	slices.SortStableFunc(resources, func(a, b util.DiscoveredResource) int {
		switch {
		case isPods(a.GVR) == isPods(b.GVR):
			return 0
		case isPods(a.GVR):
			return -1
		}
		return 1
	})
	for _, res := range resources {
		if !res.Namespaced {
			continue
		}
		if !isPods(res.GVR) && r.remainingByGR["pods"] > 0 {
			break
		}
		api := c.metadata.Resource(res.GVR).Namespace(namespace)
		list, err := api.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue // the resource went away since discovery
		}
		if err != nil {
			r.deleteErrs = append(r.deleteErrs, fmt.Errorf("list %s: %w", res.GVR.GroupResource(), err))
			continue
		}
		left := 0
		for _, item := range list.Items {
			if item.DeletionTimestamp == nil {
				uid := item.UID
				err := api.Delete(ctx, item.Name, metav1.DeleteOptions{PropagationPolicy: &background,
					Preconditions: &metav1.Preconditions{UID: &uid}})
				if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					continue // gone already, or replaced by a new object the next pass handles
				}
				if err != nil {
					r.deleteErrs = append(r.deleteErrs, fmt.Errorf("delete %s %s: %w", res.GVR.GroupResource(), item.Name, err))
					left++
					continue
				}
			}
			// Deleted, or already being deleted: check whether it is really gone.
			cur, err := api.Get(ctx, item.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && cur.UID != item.UID) {
				continue
			}
			left++
			if err == nil {
				for _, f := range cur.Finalizers {
					r.remainingByFinal[f]++
				}
			}
		}
		if left > 0 {
			r.remainingByGR[res.GVR.GroupResource().String()] += left
		}
	}
	if len(r.deleteErrs) > 0 {
		return r, utilerrors.NewAggregate(r.deleteErrs)
	}
	if r.discoveryErr != nil {
		return r, r.discoveryErr
	}
	return r, nil
}

// isPods: the resource ordered namespace deletion empties first.
func isPods(gvr schema.GroupVersionResource) bool { return gvr.Group == "" && gvr.Resource == "pods" }

// conditions renders the report as the namespace deletion conditions upstream shows.
func (r *contentReport) conditions() []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, failed bool, badReason, badMessage, okReason, okMessage string) corev1.NamespaceCondition {
		if failed {
			return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: badReason, Message: badMessage}
		}
		return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReason, Message: okMessage}
	}
	var discoveryMsg string
	var groupErr *discovery.ErrGroupDiscoveryFailed
	if errors.As(r.discoveryErr, &groupErr) {
		var failed []string
		for gv, err := range groupErr.Groups {
			failed = append(failed, fmt.Sprintf("%s: %v", gv, err))
		}
		sort.Strings(failed)
		discoveryMsg = fmt.Sprintf("Discovery failed for some groups, %d failing: %s", len(failed), strings.Join(failed, ", "))
	} else if r.discoveryErr != nil {
		discoveryMsg = fmt.Sprintf("Discovery failed: %v", r.discoveryErr)
	}
	return []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, r.discoveryErr != nil, "DiscoveryFailed", discoveryMsg,
			"ResourcesDiscovered", "All resources successfully discovered"),
		cond(corev1.NamespaceDeletionGVParsingFailure, false, "", "",
			"ParsedGroupVersions", "All legacy kube types successfully parsed"),
		cond(corev1.NamespaceDeletionContentFailure, len(r.deleteErrs) > 0, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(r.deleteErrs), utilerrors.NewAggregate(r.deleteErrs)),
			"ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
		cond(corev1.NamespaceContentRemaining, len(r.remainingByGR) > 0, "SomeResourcesRemain",
			"Some resources are remaining: "+summarize(r.remainingByGR, "%s has %d resource instances"),
			"ContentRemoved", "All content successfully removed"),
		cond(corev1.NamespaceFinalizersRemaining, len(r.remainingByFinal) > 0, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+summarize(r.remainingByFinal, "%s in %d resource instances"),
			"ContentHasNoFinalizers", "All content-preserving finalizers finished"),
	}
}

func summarize(counts map[string]int, format string) string {
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf(format, k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// updateStatus writes the conditions (and the Terminating phase) when they changed;
// a condition's lastTransitionTime moves only when its status does.
func (c *Controller) updateStatus(ctx context.Context, ns *corev1.Namespace, want []corev1.NamespaceCondition) error {
	updated := ns.DeepCopy()
	updated.Status.Phase = corev1.NamespaceTerminating
	changed := ns.Status.Phase != corev1.NamespaceTerminating
	now := metav1.Now()
	for _, w := range want {
		i := slices.IndexFunc(updated.Status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == w.Type })
		if i < 0 {
			w.LastTransitionTime = now
			updated.Status.Conditions = append(updated.Status.Conditions, w)
			changed = true
			continue
		}
		have := &updated.Status.Conditions[i]
		if have.Status == w.Status && have.Reason == w.Reason && have.Message == w.Message {
			continue
		}
		if have.Status != w.Status {
			have.LastTransitionTime = now
		}
		have.Status, have.Reason, have.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	if !changed {
		return nil
	}
	_, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

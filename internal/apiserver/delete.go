package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/registry/apiextensions"
)

var (
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	podsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	servicesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// deleteOptions reads DeleteOptions from the body or, failing that, the query.
func (s *Server) deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		ser := s.codecs.json
		switch requestMediaType(r) {
		case mediaProtobuf:
			ser = s.codecs.protobuf
		case mediaYAML:
			ser = s.codecs.yaml
		}
		if _, _, err := ser.Decode(data, &schema.GroupVersionKind{Version: "v1", Kind: "DeleteOptions"}, opts); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding DeleteOptions: %v", err))
		}
	}
	q := r.URL.Query()
	if g := q.Get("gracePeriodSeconds"); g != "" && opts.GracePeriodSeconds == nil {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", g))
		}
		opts.GracePeriodSeconds = &n
	}
	if p := q.Get("propagationPolicy"); p != "" && opts.PropagationPolicy == nil {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	if o := q.Get("orphanDependents"); o != "" && opts.OrphanDependents == nil {
		b := isTrue(o)
		opts.OrphanDependents = &b
	}
	opts.DryRun = append(opts.DryRun, q["dryRun"]...)
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("DeleteOptions.propagationPolicy: Unsupported value: %q: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"", *opts.PropagationPolicy))
		}
		if opts.OrphanDependents != nil {
			return nil, apierrors.NewBadRequest("DeleteOptions.propagationPolicy: Invalid value: \"" + string(*opts.PropagationPolicy) + "\": orphanDependents and deletionPropagation cannot be both set")
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q", v))
		}
	}
	return opts, nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	format, err := negotiate(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts, err := s.deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, gone, err := s.deleteObject(r.Context(), h, info.Namespace, info.Name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// As upstream: 200 also for a deletion still in progress (graceful, finalizers), 202
	// only when the client asked for dependents not to be orphaned.
	code := http.StatusOK
	if !gone && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	s.respondObject(w, r, code, h, obj, format)
}

// deleteObject deletes an object, or starts its deletion when finalizers or a grace
// period hold it. It returns the object's last state and whether it is gone.
func (s *Server) deleteObject(ctx context.Context, h *resourceHandler, namespace, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	gr := h.GroupVersionResource().GroupResource()
	dryRun := len(opts.DryRun) > 0
	var last runtime.Object
	var gone bool
	update := func(stored runtime.Object) (runtime.Object, error) {
		current, err := h.present(stored)
		if err != nil {
			return nil, err
		}
		obj := current.DeepCopyObject()
		acc := accessor(obj)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != acc.GetUID() {
				return nil, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, acc.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
				return nil, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, acc.GetResourceVersion()))
			}
		}
		attrs := s.admissionAttributes(ctx, admission.Delete, h, "", namespace, name, nil, current, dryRun, opts)
		if err := s.mutate(ctx, attrs); err != nil {
			return nil, err
		}
		if err := s.validateAdmission(ctx, attrs); err != nil {
			return nil, err
		}
		last, gone = obj, false
		now := metav1.NewTime(time.Now())
		setGCFinalizers(acc, opts)
		if h.GroupVersionResource() == crdGVR && acc.GetDeletionTimestamp() == nil {
			// A CRD's custom resources go before it does (customresources.go).
			acc.SetFinalizers(append(acc.GetFinalizers(), apiextensions.Finalizer))
		}
		if grace, ok := s.gracePeriod(h, obj, opts); ok && grace > 0 {
			// Graceful deletion: the kubelet stops the containers, then deletes with 0.
			deadline := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
			if old := acc.GetDeletionTimestamp(); old == nil || deadline.Before(old) {
				if old == nil {
					bumpGeneration(acc)
				}
				acc.SetDeletionTimestamp(&deadline)
				acc.SetDeletionGracePeriodSeconds(&grace)
			}
		} else if len(acc.GetFinalizers()) > 0 || blockedByNamespaceFinalizers(h, obj) {
			if acc.GetDeletionTimestamp() == nil {
				bumpGeneration(acc)
				acc.SetDeletionTimestamp(&now)
				zero := int64(0)
				acc.SetDeletionGracePeriodSeconds(&zero)
			} else if ok {
				zero := int64(0)
				acc.SetDeletionGracePeriodSeconds(&zero)
			}
			if ns, isNS := obj.(*corev1.Namespace); isNS {
				ns.Status.Phase = corev1.NamespaceTerminating
			}
		} else {
			gone = true
			if dryRun {
				return nil, errDryRunDone
			}
			return nil, nil
		}
		if dryRun {
			return nil, errDryRunDone
		}
		acc.SetResourceVersion("")
		return h.toStorage(obj)
	}
	stored, deleted, err := s.store.GuaranteedUpdate(ctx, h.key(namespace, name), h.storage.New, update)
	if errors.Is(err, errDryRunDone) {
		return last, gone, nil
	}
	if err != nil {
		return nil, false, storageError(err, gr, name)
	}
	out, err := h.present(stored)
	if err != nil {
		return nil, false, err
	}
	if deleted {
		s.afterDelete(ctx, h, out)
	}
	return out, deleted, nil
}

// setGCFinalizers records how dependents are to be treated: orphaned, deleted first
// (foreground), or left to the garbage collector (background, the default).
func setGCFinalizers(acc metav1.Object, opts *metav1.DeleteOptions) {
	policy := metav1.DeletionPropagation("")
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	} else if opts.OrphanDependents != nil {
		policy = metav1.DeletePropagationBackground
		if *opts.OrphanDependents {
			policy = metav1.DeletePropagationOrphan
		}
	}
	if policy == "" {
		return
	}
	var kept []string
	for _, f := range acc.GetFinalizers() {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			kept = append(kept, f)
		}
	}
	switch policy {
	case metav1.DeletePropagationOrphan:
		kept = append(kept, metav1.FinalizerOrphanDependents)
	case metav1.DeletePropagationForeground:
		kept = append(kept, metav1.FinalizerDeleteDependents)
	}
	acc.SetFinalizers(kept)
}

// gracePeriod is the deletion grace of an object; ok is false for resources deleted at
// once. A pod gets its terminationGracePeriodSeconds unless it never ran or has ended.
func (s *Server) gracePeriod(h *resourceHandler, obj runtime.Object, opts *metav1.DeleteOptions) (int64, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || h.GroupVersionResource() != podsGVR {
		return 0, false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		grace = 0
	}
	return grace, true
}

// blockedByNamespaceFinalizers: a namespace stays until its spec finalizers are cleared
// through the finalize subresource.
func blockedByNamespaceFinalizers(h *resourceHandler, obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// afterDelete releases what an object held (a service's cluster IP and node ports).
func (s *Server) afterDelete(ctx context.Context, h *resourceHandler, obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok && s.services != nil {
		s.services.release(context.WithoutCancel(ctx), svc)
	}
}

func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	opts, err := s.deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lopts, err := s.parseListOptions(r.URL.Query(), h, info)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lopts.limit, lopts.continueToken = 0, ""
	objs, _, _, _, err := s.listObjects(r.Context(), h, info.Namespace, lopts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, obj := range objs {
		acc := accessor(obj)
		if _, _, err := s.deleteObject(r.Context(), h, acc.GetNamespace(), acc.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
			s.writeError(w, r, err)
			return
		}
	}
	s.writeStatus(w, metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusOK})
}

// bumpGeneration marks the start of an object's deletion in its generation, as upstream
// does for objects that track one: controllers see that their object changed.
func bumpGeneration(acc metav1.Object) {
	if g := acc.GetGeneration(); g > 0 {
		acc.SetGeneration(g + 1)
	}
}

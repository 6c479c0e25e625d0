// Package servicecidr reports whether each ServiceCIDR is in use, through its Ready
// condition, as upstream's service-cidr-controller does for the ServiceCIDRs it serves.
//
// mizzen's apiserver allocates ClusterIPs from one range only, its
// --service-cluster-ip-range, which the default ServiceCIDR "kubernetes" shows. A
// ServiceCIDR inside that range is Ready; one outside it is accepted but not used, and
// says so (Ready False, reason NotAllocating) rather than looking usable.
package servicecidr

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs.
const Name = "service-cidr-controller"

// defaultName is the ServiceCIDR the apiserver creates from its own range.
const defaultName = "kubernetes"

// Reasons and messages of the Ready condition.
const (
	readyMessage        = "Kubernetes Service CIDR is ready"
	reasonNotAllocating = "NotAllocating"
)

// Controller keeps ServiceCIDRs' Ready conditions; its queue holds ServiceCIDR names.
type Controller struct {
	client kubernetes.Interface
	cidrs  networkinglisters.ServiceCIDRLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's handlers on the ServiceCIDR informer.
func New(client kubernetes.Interface, cidrs networkinginformers.ServiceCIDRInformer) *Controller {
	c := &Controller{client: client, cidrs: cidrs.Lister(), synced: cidrs.Informer().HasSynced, queue: util.NewQueue("service_cidr")}
	enqueue := func(obj any) {
		sc, ok := obj.(*networkingv1.ServiceCIDR)
		if !ok {
			return
		}
		if sc.Name == defaultName {
			// Every other ServiceCIDR is judged against the default one.
			all, _ := c.cidrs.List(labels.Everything())
			for _, other := range all {
				util.Enqueue(c.queue, other)
			}
		}
		util.Enqueue(c.queue, sc)
	}
	cidrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return c
}

// Run processes ServiceCIDRs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	sc, err := c.cidrs.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if sc.DeletionTimestamp != nil || sc.Name == defaultName {
		return nil // the apiserver reports its own range Ready
	}
	def, err := c.cidrs.Get(defaultName)
	if apierrors.IsNotFound(err) {
		return nil // judged when the default appears
	}
	if err != nil {
		return err
	}
	want := Condition(sc, def)
	if cur := meta.FindStatusCondition(sc.Status.Conditions, want.Type); cur != nil &&
		cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return nil
	}
	updated := sc.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, want)
	_, err = c.client.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Condition is the Ready condition of sc given the default ServiceCIDR def: True when
// every range of sc lies in one of def's, else False with the reason.
func Condition(sc, def *networkingv1.ServiceCIDR) metav1.Condition {
	var served []netip.Prefix
	for _, s := range def.Spec.CIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			served = append(served, p.Masked())
		}
	}
	var outside []string
	for _, s := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil || !within(p.Masked(), served) {
			outside = append(outside, s)
		}
	}
	if len(outside) == 0 {
		return metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: readyMessage}
	}
	return metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionFalse, Reason: reasonNotAllocating,
		Message: fmt.Sprintf("ClusterIPs are allocated only from the service cluster IP range (%s); %s lies outside it",
			strings.Join(def.Spec.CIDRs, ", "), strings.Join(outside, ", "))}
}

func within(p netip.Prefix, served []netip.Prefix) bool {
	for _, s := range served {
		if s.Bits() <= p.Bits() && s.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

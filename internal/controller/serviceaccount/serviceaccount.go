// Package serviceaccount keeps a "default" ServiceAccount in every active namespace,
// recreating it when it is deleted.
package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "serviceaccount"

// defaultName is the ServiceAccount every namespace gets.
const defaultName = "default"

// Controller ensures the default ServiceAccount; its queue holds namespace names.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's handlers on the informers.
func New(client kubernetes.Interface, namespaces coreinformers.NamespaceInformer, accounts coreinformers.ServiceAccountInformer) *Controller {
	c := &Controller{
		client:     client,
		namespaces: namespaces.Lister(),
		accounts:   accounts.Lister(),
		synced:     []cache.InformerSynced{namespaces.Informer().HasSynced, accounts.Informer().HasSynced},
		queue:      util.NewQueue(Name),
	}
	namespaces.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	accounts.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if sa, ok := unwrap(obj); ok && sa.Name == defaultName {
				c.queue.Add(sa.Namespace)
			}
		},
	})
	return c
}

func unwrap(obj any) (*corev1.ServiceAccount, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	return sa, ok
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync creates the default ServiceAccount in an active namespace that lacks it.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil
	}
	if _, err := c.accounts.ServiceAccounts(namespace).Get(defaultName); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: defaultName, Namespace: namespace}}
	_, err = c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Package tokencleaner deletes bootstrap token Secrets (kube-system, type
// bootstrap.kubernetes.io/token) once their expiration has passed, as upstream's
// tokencleaner does; a token not yet expired is looked at again when it expires.
package tokencleaner

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
	"mizzen/internal/jointoken"
)

// Name names the controller in its logs.
const Name = "token-cleaner"

// Controller deletes expired bootstrap tokens; its queue holds Secret keys.
type Controller struct {
	client  kubernetes.Interface
	secrets corelisters.SecretLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	now     func() time.Time
}

// New registers the controller's handlers on the Secret informer.
func New(client kubernetes.Interface, secrets coreinformers.SecretInformer) *Controller {
	c := &Controller{client: client, secrets: secrets.Lister(), synced: secrets.Informer().HasSynced,
		queue: util.NewQueue("token_cleaner"), now: time.Now}
	enqueue := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && isBootstrapToken(s) {
			util.Enqueue(c.queue, s)
		}
	}
	secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return c
}

func isBootstrapToken(s *corev1.Secret) bool {
	return s.Namespace == jointoken.Namespace && s.Type == corev1.SecretTypeBootstrapToken
}

// Run processes Secrets until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced)
}

// sync deletes the Secret if its token has expired, or waits for its expiry.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	s, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isBootstrapToken(s) || s.DeletionTimestamp != nil {
		return nil
	}
	exp := s.Data["expiration"]
	if len(exp) == 0 {
		return nil
	}
	expires, err := time.Parse(time.RFC3339, string(exp))
	if err != nil {
		// Upstream deletes a token whose expiration it cannot read: it would never
		// authenticate anyway.
		expires = time.Time{}
	}
	if left := expires.Sub(c.now()); left > 0 {
		return util.RequeueAfter(left, "token not expired yet")
	}
	uid := s.UID
	err = c.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

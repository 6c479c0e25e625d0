// Package rootcacertpublisher writes the ConfigMap kube-root-ca.crt, holding the
// apiserver's CA bundle under ca.crt, into every namespace and keeps it current.
package rootcacertpublisher

import (
	"context"
	"maps"

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
const Name = "root-ca-cert-publisher"

const (
	configMapName  = "kube-root-ca.crt"
	dataKey        = "ca.crt"
	descriptionKey = "kubernetes.io/description"
	description    = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Controller publishes the CA; its queue holds namespace names.
type Controller struct {
	client     kubernetes.Interface
	rootCA     string
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's handlers; rootCA is the PEM bundle to publish.
func New(client kubernetes.Interface, rootCA []byte, namespaces coreinformers.NamespaceInformer, configMaps coreinformers.ConfigMapInformer) *Controller {
	c := &Controller{
		client:     client,
		rootCA:     string(rootCA),
		namespaces: namespaces.Lister(),
		configMaps: configMaps.Lister(),
		synced:     []cache.InformerSynced{namespaces.Informer().HasSynced, configMaps.Informer().HasSynced},
		queue:      util.NewQueue("root_ca_cert_publisher"),
	}
	namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	onConfigMap := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == configMapName {
			c.queue.Add(cm.Namespace)
		}
	}
	configMaps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { onConfigMap(obj) },
		DeleteFunc: onConfigMap,
	})
	return c
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync makes the namespace's kube-root-ca.crt hold exactly the current bundle.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp != nil {
		return nil
	}
	want := map[string]string{dataKey: c.rootCA}
	cm, err := c.configMaps.ConfigMaps(namespace).Get(configMapName)
	if apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: configMapName, Namespace: namespace,
				Annotations: map[string]string{descriptionKey: description}},
			Data: want,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) { // raced with a create, or the namespace went away
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if maps.Equal(cm.Data, want) && len(cm.BinaryData) == 0 && cm.Annotations[descriptionKey] == description {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data, cm.BinaryData = want, nil
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[descriptionKey] = description
	_, err = c.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		c.queue.Add(namespace) // deleted meanwhile: recreate on the next pass
		return nil
	}
	return err
}

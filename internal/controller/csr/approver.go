package csr

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// ApproverName names the approver in its logs and events.
const ApproverName = "csrapproving"

// Approver approves the CSRs upstream's csrapproving approves, and kubelet serving
// CSRs for the node's own names and addresses. A request it will not approve stays
// pending for a person or another approver, with a Warning event saying why.
type Approver struct {
	client kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	nodes  corelisters.NodeLister
	leases coordlisters.LeaseLister
	now    func() time.Time
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	events *util.Events
}

// NewApprover registers the approver's handlers.
func NewApprover(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, nodes coreinformers.NodeInformer, leases coordinformers.LeaseInformer) *Approver {
	a := &Approver{client: client, csrs: csrs.Lister(), nodes: nodes.Lister(), leases: leases.Lister(), now: time.Now,
		synced: []cache.InformerSynced{csrs.Informer().HasSynced, nodes.Informer().HasSynced, leases.Informer().HasSynced},
		queue:  util.NewQueue("certificate_approver"), events: util.NewEvents(client, ApproverName)}
	csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(a.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(a.queue, obj) },
	})
	// A serving CSR may come before its node's addresses: look again when they change.
	onNode := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		list, _ := a.csrs.List(labels.Everything())
		for _, csr := range list {
			if csr.Spec.SignerName == SignerKubeletServing && csr.Spec.Username == nodeUserPrefix+node.Name && !decided(csr) {
				a.queue.Add(csr.Name)
			}
		}
	}
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
	})
	return a
}

// Run approves until ctx ends.
func (a *Approver) Run(ctx context.Context, workers int) {
	a.events.Start(ctx)
	util.RunKeyWorkers(ctx, ApproverName, a.queue, workers, a.sync, a.synced...)
}

func (a *Approver) sync(ctx context.Context, name string) error {
	csr, err := a.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if decided(csr) || len(csr.Status.Certificate) > 0 {
		return nil
	}
	req, err := parseRequest(csr)
	if err != nil {
		a.pending(csr, "unable to parse the request: %v", err)
		return nil
	}
	switch csr.Spec.SignerName {
	case SignerKubeletClient:
		if err := validateKubeletClient(req, csr.Spec.Usages); err != nil {
			a.pending(csr, "not a kubelet client certificate request: %v", err)
			return nil
		}
		// A node renewing its own certificate, then a bootstrapper asking for one,
		// each allowed only if RBAC lets the requester create the subresource.
		recognizers := []struct{ subresource, message string }{
			{"selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview."},
			{"nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview."},
		}
		for _, r := range recognizers {
			if r.subresource == "selfnodeclient" && req.Subject.CommonName != csr.Spec.Username {
				continue
			}
			if r.subresource == "nodeclient" {
				if why := a.nameInUse(req.Subject.CommonName[len(nodeUserPrefix):]); why != "" {
					return a.deny(ctx, csr, "NodeNameInUse", why)
				}
			}
			allowed, err := a.authorized(ctx, csr, r.subresource)
			if err != nil {
				return err
			}
			if allowed {
				return a.approve(ctx, csr, r.message)
			}
		}
		a.pending(csr, "%s may not create certificatesigningrequests/nodeclient or /selfnodeclient for %q", csr.Spec.Username, req.Subject.CommonName)
	case SignerKubeletServing:
		if err := validateKubeletServing(req, csr.Spec.Usages); err != nil {
			a.pending(csr, "not a kubelet serving certificate request: %v", err)
			return nil
		}
		if req.Subject.CommonName != csr.Spec.Username || !slices.Contains(csr.Spec.Groups, nodesGroup) {
			a.pending(csr, "only the node %q itself gets its serving certificate approved automatically, not %s", req.Subject.CommonName, csr.Spec.Username)
			return nil
		}
		nodeName := req.Subject.CommonName[len(nodeUserPrefix):]
		node, err := a.nodes.Get(nodeName)
		if apierrors.IsNotFound(err) {
			return nil // looked at again when the node registers
		}
		if err != nil {
			return err
		}
		if len(node.Status.Addresses) == 0 {
			return nil // looked at again once the node reports its addresses
		}
		if why := outsideNode(node, req.DNSNames, req.IPAddresses); why != "" {
			a.pending(csr, "%s", why)
			return nil
		}
		return a.approve(ctx, csr, "Auto approving kubelet serving certificate for the node's own names and addresses.")
	case SignerClient:
		// mizzen's agents get their proxy's identity from their node's: a node may have
		// a system:kube-proxy client certificate, and nothing else, approved.
		if req.Subject.CommonName != proxyUser || len(req.Subject.Organization) > 0 {
			return nil // someone else's to approve
		}
		if !strings.HasPrefix(csr.Spec.Username, nodeUserPrefix) || !slices.Contains(csr.Spec.Groups, nodesGroup) {
			a.pending(csr, "only nodes get a %s client certificate approved automatically, not %s", proxyUser, csr.Spec.Username)
			return nil
		}
		if err := validateClient(req, csr.Spec.Usages); err != nil || len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
			a.pending(csr, "not a plain client certificate request for %s", proxyUser)
			return nil
		}
		return a.approve(ctx, csr, "Auto approving kube-proxy client certificate for node "+csr.Spec.Username[len(nodeUserPrefix):]+".")
	}
	return nil
}

// proxyUser is upstream's kube-proxy identity, bound to system:node-proxier.
const proxyUser = "system:kube-proxy"

// liveLease is how recently a node's Lease must have been renewed for the node to
// count as running: upstream's default node monitor grace period.
const liveLease = 40 * time.Second

// nameInUse says why a bootstrapper may not take the node name: a node of that name
// is running (its Lease is fresh), so a second machine would take over its identity.
func (a *Approver) nameInUse(name string) string {
	if _, err := a.nodes.Get(name); err != nil {
		return ""
	}
	lease, err := a.leases.Leases(corev1.NamespaceNodeLease).Get(name)
	if err != nil || lease.Spec.RenewTime == nil {
		return ""
	}
	if age := a.now().Sub(lease.Spec.RenewTime.Time); age < liveLease {
		return fmt.Sprintf("node %q is running with another identity (its Lease was renewed %s ago): give this machine another node name, or stop the other one and delete its Node", name, age.Round(time.Second))
	}
	return ""
}

// deny refuses a request that would take over a running node's identity: unlike
// anything else this approver will not approve, waiting would not help.
func (a *Approver) deny(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, reason, message string) error {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue,
		Reason: reason, Message: message, LastUpdateTime: metav1.Now(),
	})
	_, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// outsideNode names the first DNS name or IP that is not the node's, "" when all are.
func outsideNode(node *corev1.Node, dnsNames []string, ips []net.IP) string {
	names := []string{node.Name}
	var addrs []net.IP
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				addrs = append(addrs, ip)
			}
		}
	}
	for _, n := range dnsNames {
		if !slices.Contains(names, n) {
			return fmt.Sprintf("DNS name %q is not one of node %s's names %v", n, node.Name, names)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(addrs, ip.Equal) {
			return fmt.Sprintf("IP %s is not one of node %s's addresses", ip, node.Name)
		}
	}
	return ""
}

// authorized asks the apiserver whether the requester may create the CSR
// subresource, as upstream's approver does.
func (a *Approver) authorized(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Verb: "create", Subresource: subresource},
	}}
	out, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview for CSR %s: %w", csr.Name, err)
	}
	return out.Status.Allowed, nil
}

func (a *Approver) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "AutoApproved", Message: message, LastUpdateTime: metav1.Now(),
	})
	_, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// pending tells, in an event on the CSR, why it was left for someone else to decide.
func (a *Approver) pending(csr *certificatesv1.CertificateSigningRequest, format string, args ...any) {
	a.events.Eventf(csr, corev1.EventTypeWarning, "NotAutoApproved", "left pending: "+format, args...)
}

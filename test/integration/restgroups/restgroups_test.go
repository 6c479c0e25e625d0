// Package restgroups tests the networking, rbac, storage, scheduling, coordination,
// discovery, admissionregistration, certificates and apiregistration resources
// against a real mizzen apiserver on embedded etcd, as a client sees them.
package restgroups

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"reflect"
	sigsjson "sigs.k8s.io/json"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/testing/apiserver"
)

var ctx = context.Background()

// cause is one field cause of a 422 response.
type cause struct {
	Type  metav1.CauseType
	Field string
}

// wantInvalid checks that err is a 422 Invalid whose causes are exactly want.
func wantInvalid(t *testing.T, err error, want ...cause) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v, want 422 Invalid", err)
	}
	var got []cause
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			got = append(got, cause{c.Type, c.Field})
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("causes = %v, want %v (%v)", got, want, err)
	}
}

// table fetches path as a server-side Table, as kubectl get does.
func table(t *testing.T, client rest.Interface, path string) *metav1.Table {
	t.Helper()
	raw, err := client.Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s as Table: %v", path, err)
	}
	// Decode as kubectl does: whole numbers stay integers.
	var tbl metav1.Table
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	return &tbl
}

// onlyRow keeps the rows whose first cell is name: a cluster starts with objects of
// its own (system priority classes, local APIServices).
func onlyRow(tbl *metav1.Table, name string) *metav1.Table {
	out := *tbl
	out.Rows = nil
	for _, r := range tbl.Rows {
		if len(r.Cells) > 0 && r.Cells[0] == name {
			out.Rows = append(out.Rows, r)
		}
	}
	return &out
}

func columnNames(tbl *metav1.Table) []string {
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

func TestRESTGroups(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	rc := c.CoreV1().RESTClient()

	t.Run("ingress validation and table", func(t *testing.T) {
		ings := c.NetworkingV1().Ingresses("default")
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To("nginx"),
				Rules: []networkingv1.IngressRule{{Host: "example.com", IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
					}}},
				}}},
			},
		}
		_, err := ings.Create(ctx, ing, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueRequired, "spec.rules[0].http.paths[0].pathType"})
		ing.Spec.Rules[0].HTTP.Paths[0].PathType = &prefix
		if _, err := ings.Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tbl := table(t, rc, "/apis/networking.k8s.io/v1/namespaces/default/ingresses")
		if got, want := columnNames(tbl), []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}; !reflect.DeepEqual(got, want) {
			t.Errorf("columns = %v, want %v", got, want)
		}
		if len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells[:5], []interface{}{"web", "nginx", "example.com", "", "80"}) {
			t.Errorf("rows = %+v", tbl.Rows)
		}
	})

	t.Run("networkpolicy defaults", func(t *testing.T) {
		np, err := c.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "deny"},
			Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []networkingv1.PolicyType{"Ingress", "Egress"}; !reflect.DeepEqual(np.Spec.PolicyTypes, want) {
			t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, want)
		}
		if p := np.Spec.Egress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
			t.Errorf("port protocol = %v, want TCP", p)
		}
	})

	t.Run("rbac names, defaults and immutable roleRef", func(t *testing.T) {
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "system:mizzen:reader"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a name with ':' must be accepted: %v", err)
		}
		_, err := c.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
		}, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "rules[0].nonResourceURLs"})

		rbs := c.RbacV1().RoleBindings("default")
		rb, err := rbs.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "readers"},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "system:mizzen:reader"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Name: "ci", Namespace: "default"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.Subjects[0].APIGroup != rbacv1.GroupName {
			t.Errorf("apiGroups not defaulted: %+v %+v", rb.RoleRef, rb.Subjects[0])
		}
		rb.RoleRef.Name = "admin"
		_, err = rbs.Update(ctx, rb, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "roleRef"})

		tbl := table(t, rc, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings")
		if got, want := columnNames(tbl), []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}; !reflect.DeepEqual(got, want) {
			t.Errorf("columns = %v, want %v", got, want)
		}
		if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "ClusterRole/system:mizzen:reader" || tbl.Rows[0].Cells[5] != "default/ci" {
			t.Errorf("rows = %+v", tbl.Rows)
		}
		roles := table(t, rc, "/apis/rbac.authorization.k8s.io/v1/clusterroles")
		if got, want := columnNames(roles), []string{"Name", "Created At"}; !reflect.DeepEqual(got, want) {
			t.Errorf("clusterrole columns = %v, want %v", got, want)
		}
	})

	t.Run("storageclass defaults, immutability and default marking", func(t *testing.T) {
		scs := c.StorageV1().StorageClasses()
		sc, err := scs.Create(ctx, &storagev1.StorageClass{
			ObjectMeta:  metav1.ObjectMeta{Name: "local", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: "example.com/local",
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(sc.ReclaimPolicy, "") != corev1.PersistentVolumeReclaimDelete || ptr.Deref(sc.VolumeBindingMode, "") != storagev1.VolumeBindingImmediate {
			t.Errorf("defaults = %v %v", sc.ReclaimPolicy, sc.VolumeBindingMode)
		}
		sc.Provisioner = "example.com/other"
		_, err = scs.Update(ctx, sc, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeForbidden, "provisioner"})
		tbl := table(t, rc, "/apis/storage.k8s.io/v1/storageclasses")
		if len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells[:5], []interface{}{"local (default)", "example.com/local", "Delete", "Immediate", false}) {
			t.Errorf("rows = %+v", tbl.Rows)
		}
	})

	t.Run("priorityclass reserved names and immutable value", func(t *testing.T) {
		pcs := c.SchedulingV1().PriorityClasses()
		_, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 10}, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeForbidden, "metadata.name"})
		pc, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(pc.PreemptionPolicy, "") != corev1.PreemptLowerPriority {
			t.Errorf("preemptionPolicy = %v", pc.PreemptionPolicy)
		}
		pc.Value = 2000
		_, err = pcs.Update(ctx, pc, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeForbidden, "value"})
	})

	t.Run("lease round trip", func(t *testing.T) {
		leases := c.CoordinationV1().Leases("default")
		lease, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](0)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "spec.leaseDurationSeconds"})
	})

	t.Run("endpointslice address type is immutable", func(t *testing.T) {
		slices := c.DiscoveryV1().EndpointSlices("default")
		_, err := slices.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "nothing"}}, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueRequired, "addressType"})
		slice, err := slices.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
			Ports:     []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := slice.Ports[0]; ptr.Deref(p.Protocol, "") != corev1.ProtocolTCP || p.Name == nil {
			t.Errorf("port not defaulted: %+v", p)
		}
		slice.AddressType = discoveryv1.AddressTypeFQDN
		slice.Endpoints[0].Addresses = []string{"web.example.com"}
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "addressType"})
	})

	t.Run("webhook configuration defaults and validation", func(t *testing.T) {
		hooks := c.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "unused"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:         "never.mizzen.example.com",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
				// A group nothing uses, so that the hook is never called.
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"never.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
				}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		_, err := hooks.Create(ctx, cfg, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueRequired, "webhooks[0].sideEffects"})
		cfg.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNone)
		created, err := hooks.Create(ctx, cfg, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := created.Webhooks[0]
		if ptr.Deref(w.TimeoutSeconds, 0) != 10 || ptr.Deref(w.MatchPolicy, "") != admissionregistrationv1.Equivalent || w.NamespaceSelector == nil {
			t.Errorf("defaults missing: %+v", w)
		}
		tbl := table(t, rc, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations")
		if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != int64(1) {
			t.Errorf("rows = %+v", tbl.Rows)
		}
	})

	t.Run("certificatesigningrequest", func(t *testing.T) {
		csrs := c.CertificatesV1().CertificateSigningRequests()
		_, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: []byte("nope"), SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{"client auth"}},
		}, metav1.CreateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "spec.request"})
		if _, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "good"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: requestPEM(t), SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{"client auth"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("field selector spec.signerName: %v, %d items", err, len(list.Items))
		}
		tbl := table(t, rc, "/apis/certificates.k8s.io/v1/certificatesigningrequests")
		if got, want := columnNames(tbl), []string{"Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"}; !reflect.DeepEqual(got, want) {
			t.Errorf("columns = %v, want %v", got, want)
		}
		if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[5] != "Pending" {
			t.Errorf("rows = %+v", tbl.Rows)
		}
	})

	t.Run("apiservice", func(t *testing.T) {
		body := func(svc *apiregistrationv1.APIService) []byte {
			svc.APIVersion, svc.Kind = "apiregistration.k8s.io/v1", "APIService"
			data, err := json.Marshal(svc)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		const path = "/apis/apiregistration.k8s.io/v1/apiservices"
		bad := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
			Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100,
				Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}}}
		err := rc.Post().AbsPath(path).Body(body(bad)).Do(ctx).Error()
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "metadata.name"})
		bad.Name = "v1beta1.metrics.k8s.io"
		raw, err := rc.Post().AbsPath(path).Body(body(bad)).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var created apiregistrationv1.APIService
		if err := json.Unmarshal(raw, &created); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(created.Spec.Service.Port, 0) != 443 {
			t.Errorf("service port = %v, want 443", created.Spec.Service.Port)
		}
		tbl := onlyRow(table(t, rc, path), "v1beta1.metrics.k8s.io")
		if got, want := columnNames(tbl), []string{"Name", "Service", "Available", "Age"}; !reflect.DeepEqual(got, want) {
			t.Errorf("columns = %v, want %v", got, want)
		}
		if len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells[:3], []interface{}{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "Unknown"}) {
			t.Errorf("rows = %+v", tbl.Rows)
		}
	})
}

// Discovery must show the names kubectl resolves: short names and categories.
func TestDiscovery(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	type want struct {
		groupVersion, resource string
		namespaced             bool
		shortNames, categories []string
	}
	for _, w := range []want{
		{"networking.k8s.io/v1", "ingresses", true, []string{"ing"}, nil},
		{"networking.k8s.io/v1", "networkpolicies", true, []string{"netpol"}, nil},
		{"storage.k8s.io/v1", "storageclasses", false, []string{"sc"}, nil},
		{"scheduling.k8s.io/v1", "priorityclasses", false, []string{"pc"}, nil},
		{"node.k8s.io/v1", "runtimeclasses", false, nil, nil},
		{"resource.k8s.io/v1", "resourceclaims", true, nil, nil},
		{"resource.k8s.io/v1", "devicetaintrules", false, nil, nil},
		{"certificates.k8s.io/v1", "certificatesigningrequests", false, []string{"csr"}, nil},
		{"rbac.authorization.k8s.io/v1", "clusterrolebindings", false, nil, nil},
		{"coordination.k8s.io/v1", "leases", true, nil, nil},
		{"events.k8s.io/v1", "events", true, []string{"ev"}, nil},
		{"admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", false, nil, []string{"api-extensions"}},
		{"apiregistration.k8s.io/v1", "apiservices", false, nil, []string{"api-extensions"}},
	} {
		list, err := c.Discovery().ServerResourcesForGroupVersion(w.groupVersion)
		if err != nil {
			t.Errorf("%s: %v", w.groupVersion, err)
			continue
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name != w.resource {
				continue
			}
			found = true
			if r.Namespaced != w.namespaced || !reflect.DeepEqual(r.ShortNames, w.shortNames) || !reflect.DeepEqual(r.Categories, w.categories) {
				t.Errorf("%s %s: namespaced=%v shortNames=%v categories=%v", w.groupVersion, w.resource, r.Namespaced, r.ShortNames, r.Categories)
			}
		}
		if !found {
			t.Errorf("%s does not list %s", w.groupVersion, w.resource)
		}
	}
}

// APIService is not in client-go's scheme, so clients patch it with merge patches;
// the server knows its Go type, so strategic merge patches work too.
func TestAPIServicePatches(t *testing.T) {
	rc := kubernetes.NewForConfigOrDie(apiserver.Start(t)).CoreV1().RESTClient()
	const path = "/apis/apiregistration.k8s.io/v1/apiservices"
	if err := rc.Post().AbsPath(path).Body([]byte(`{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
		"metadata":{"name":"v1.example.com"},"spec":{"group":"example.com","version":"v1","groupPriorityMinimum":1000,"versionPriority":10}}`)).
		Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		patchType types.PatchType
		body      string
	}{
		{types.MergePatchType, `{"metadata":{"labels":{"a":"1"}}}`},
		{types.StrategicMergePatchType, `{"metadata":{"labels":{"b":"2"}},"spec":{"versionPriority":20}}`},
	} {
		raw, err := rc.Patch(p.patchType).AbsPath(path, "v1.example.com").Body([]byte(p.body)).DoRaw(ctx)
		if err != nil {
			t.Fatalf("%s: %v", p.patchType, err)
		}
		var got apiregistrationv1.APIService
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if p.patchType == types.StrategicMergePatchType && (got.Labels["a"] != "1" || got.Labels["b"] != "2" || got.Spec.VersionPriority != 20) {
			t.Errorf("after %s: labels=%v versionPriority=%d", p.patchType, got.Labels, got.Spec.VersionPriority)
		}
	}
	// An invalid patch is refused with the field that is wrong.
	err := rc.Patch(types.MergePatchType).AbsPath(path, "v1.example.com").Body([]byte(`{"spec":{"versionPriority":0}}`)).Do(ctx).Error()
	wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "spec.versionPriority"})
}

func requestPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

package customresources

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"mizzen/internal/testing/apiserver"
)

var (
	crdGVR  = apiextv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	certGVR = schema.GroupVersionResource{Group: "certs.example.com", Version: "v1", Resource: "certificates"}
)

// scaleInProtobuf reads and writes a custom resource's scale subresource in protobuf,
// as client-go's scale client may: autoscaling/v1 Scale is a built-in type, so upstream
// answers it in protobuf although the custom resource itself has no protobuf form.
func scaleInProtobuf(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	do := func(method string, body []byte) *autoscalingv1.Scale {
		t.Helper()
		req, _ := http.NewRequest(method, cfg.Host+path, bytes.NewReader(body))
		req.Header.Set("Accept", runtime.ContentTypeProtobuf)
		if body != nil {
			req.Header.Set("Content-Type", runtime.ContentTypeProtobuf)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != runtime.ContentTypeProtobuf {
			t.Fatalf("%s %s in protobuf: %d %s: %q", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("decoding the Scale: %v", err)
		}
		return obj.(*autoscalingv1.Scale)
	}
	got := do(http.MethodGet, nil)
	if got.Spec.Replicas != 3 || got.Status.Selector != "app=web" {
		t.Errorf("the Scale in protobuf: %+v", got)
	}
	got.Spec.Replicas = 4
	body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, autoscalingv1.SchemeGroupVersion), got)
	if err != nil {
		t.Fatal(err)
	}
	if put := do(http.MethodPut, body); put.Spec.Replicas != 4 {
		t.Errorf("the Scale written in protobuf came back with %d replicas", put.Spec.Replicas)
	}
}

// warnings collects the Warning headers a client is sent.
type warnings struct{ got []string }

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) { w.got = append(w.got, text) }

// setup starts a server, creates the Certificate CRD and waits until it is served.
func setup(t *testing.T) (dynamic.Interface, *rest.Config, *warnings) {
	t.Helper()
	srv := startServer(t)
	cfg := rest.CopyConfig(srv.AdminConfig)
	w := &warnings{}
	cfg.WarningHandler = w
	dyn := dynamic.NewForConfigOrDie(cfg)
	createCRD(t, dyn, "testdata/certificates-crd.yaml")
	waitServed(t, dyn, certGVR)
	return dyn, cfg, w
}

func createCRD(t *testing.T, dyn dynamic.Interface, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	created, err := dyn.Resource(crdGVR).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the CRD: %v", err)
	}
	return created
}

func waitServed(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource) {
	t.Helper()
	eventually(t, "custom resource served", func() string {
		_, err := dyn.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		return ""
	})
}

func cert(name string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "certs.example.com/v1", "kind": "Certificate",
		"metadata": map[string]interface{}{"name": name},
		"spec":     spec,
	}}
	return u
}

func validSpec() map[string]interface{} {
	return map[string]interface{}{"secretName": "s", "issuerRef": map[string]interface{}{"name": "ca"}}
}

func TestCRDStatus(t *testing.T) {
	dyn, _, _ := setup(t)
	crd, err := dyn.Resource(crdGVR).Get(context.Background(), "certificates.certs.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	typed := &apiextv1.CustomResourceDefinition{}
	data, _ := json.Marshal(crd.Object)
	_ = json.Unmarshal(data, typed)
	got := map[string]string{}
	for _, c := range typed.Status.Conditions {
		got[string(c.Type)] = string(c.Status) + "/" + c.Reason
	}
	if got["NamesAccepted"] != "True/NoConflicts" || got["Established"] != "True/InitialNamesAccepted" {
		t.Errorf("conditions %v", got)
	}
	if typed.Status.AcceptedNames.Kind != "Certificate" || strings.Join(typed.Status.AcceptedNames.ShortNames, ",") != "cert,certs" {
		t.Errorf("acceptedNames %+v", typed.Status.AcceptedNames)
	}
	if strings.Join(typed.Status.StoredVersions, ",") != "v1" {
		t.Errorf("storedVersions %v", typed.Status.StoredVersions)
	}

	// The group versions are registered as local APIServices, as upstream does.
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	eventually(t, "the CRD's APIServices", func() string {
		for _, v := range []string{"v1", "v1alpha1"} {
			svc, err := apiServices.Get(context.Background(), v+".certs.example.com", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
			if len(conds) == 0 || conds[0].(map[string]interface{})["status"] != "True" || conds[0].(map[string]interface{})["reason"] != "Local" {
				return fmt.Sprint(conds)
			}
			if p, _, _ := unstructured.NestedInt64(svc.Object, "spec", "groupPriorityMinimum"); p != 1000 {
				return fmt.Sprint("groupPriorityMinimum ", p)
			}
		}
		return ""
	})

	// A second CRD of the group with a kind already taken is not served; as upstream,
	// the condition reports the last conflict found (the list kind).
	clash := &unstructured.Unstructured{}
	_ = yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certs2.certs.example.com}
spec:
  group: certs.example.com
  scope: Namespaced
  names: {plural: certs2, singular: cert2, kind: Certificate}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
`), &clash.Object)
	if _, err := dyn.Resource(crdGVR).Create(context.Background(), clash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the conflict is reported", func() string {
		obj, err := dyn.Resource(crdGVR).Get(context.Background(), "certs2.certs.example.com", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]interface{})
			if m["type"] == "NamesAccepted" && m["status"] == "False" && m["reason"] == "ListKindConflict" && m["message"] == `"CertificateList" is already in use` {
				return ""
			}
		}
		return fmt.Sprint(conds)
	})
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "certs.example.com", Version: "v1", Resource: "certs2"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a CRD whose names conflict is served: %v", err)
	}

	// Invalid CRDs are refused with upstream's messages.
	bad := clash.DeepCopy()
	bad.SetName("bads.certs.example.com")
	_ = unstructured.SetNestedField(bad.Object, "bads", "spec", "names", "plural")
	_ = unstructured.SetNestedField(bad.Object, "Bad", "spec", "names", "kind")
	_ = unstructured.SetNestedSlice(bad.Object, []interface{}{map[string]interface{}{"name": "v1", "served": true, "storage": true,
		"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{"type": "object", "properties": map[string]interface{}{"spec": map[string]interface{}{"properties": map[string]interface{}{}}}}}}}, "spec", "versions")
	_, err = dyn.Resource(crdGVR).Create(context.Background(), bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields") {
		t.Errorf("non-structural schema: %v", err)
	}
}

func TestCustomResourceWrites(t *testing.T) {
	dyn, cfg, warn := setup(t)
	ctx := context.Background()
	certs := dyn.Resource(certGVR).Namespace("default")

	// Validation, with the schema's messages.
	badSpec := map[string]interface{}{"secretName": "", "replicas": int64(101), "usages": []interface{}{"mining"}, "issuerRef": map[string]interface{}{}}
	_, err := certs.Create(ctx, cert("bad", badSpec), metav1.CreateOptions{})
	for _, want := range []string{
		`Certificate.certs.example.com "bad" is invalid`,
		`spec.issuerRef.name: Required value`,
		`spec.replicas: Invalid value: 101: spec.replicas in body should be less than or equal to 100`,
		`spec.usages[0]: Unsupported value: "mining": supported values: "digital signature", "key encipherment", "server auth", "client auth"`,
		`spec.secretName: Invalid value: "": spec.secretName in body should be at least 1 chars long`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid create: %v\nwant %s", err, want)
		}
	}
	// A CEL rule.
	celSpec := validSpec()
	celSpec["duration"], celSpec["renewBefore"] = "1h", "1h"
	_, err = certs.Create(ctx, cert("cel", celSpec), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec: Invalid value: "object": renewBefore must differ from duration`) {
		t.Errorf("CEL rule: %v", err)
	}

	// Unknown fields: Strict refuses, Warn (the default) prunes and warns.
	unknown := validSpec()
	unknown["colour"] = "blue"
	_, err = certs.Create(ctx, cert("strict", unknown), metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `strict decoding error: unknown field "spec.colour"`) {
		t.Errorf("Strict: %v", err)
	}
	created, err := certs.Create(ctx, cert("web", unknown), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "spec", "colour"); found {
		t.Errorf("unknown field kept: %v", created.Object["spec"])
	}
	if strings.Join(warn.got, ";") != `unknown field "spec.colour"` {
		t.Errorf("warnings %q", warn.got)
	}
	// Defaults, generation, managedFields.
	if d, _, _ := unstructured.NestedString(created.Object, "spec", "duration"); d != "2160h" {
		t.Errorf("default duration %q", d)
	}
	if created.GetGeneration() != 1 || len(created.GetManagedFields()) != 1 || created.GetManagedFields()[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("generation %d managedFields %v", created.GetGeneration(), created.GetManagedFields())
	}
	// The status is written only through its subresource.
	withStatus := created.DeepCopy()
	_ = unstructured.SetNestedField(withStatus.Object, int64(7), "status", "replicas")
	updated, err := certs.Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(updated.Object, "status"); found || updated.GetGeneration() != 1 {
		t.Errorf("update of the main resource changed the status or generation: %v gen %d", updated.Object["status"], updated.GetGeneration())
	}
	updated.Object["status"] = map[string]interface{}{"replicas": int64(2), "selector": "app=web"}
	st, err := certs.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(st.Object, "status", "replicas"); r != 2 || st.GetGeneration() != 1 {
		t.Errorf("status update: %v gen %d", st.Object["status"], st.GetGeneration())
	}
	// Merge and JSON patches bump the generation.
	patched, err := certs.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(patched.Object, "spec", "replicas"); r != 3 || patched.GetGeneration() != 2 {
		t.Errorf("merge patch: replicas %d generation %d", r, patched.GetGeneration())
	}
	patched, err = certs.Patch(ctx, "web", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/secretName","value":"web-2"}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(patched.Object, "spec", "secretName"); s != "web-2" {
		t.Errorf("JSON patch: %q", s)
	}
	_, err = certs.Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v", err)
	}
	// Scale.
	scale, err := certs.Get(ctx, "web", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); r != 3 || scale.GetKind() != "Scale" {
		t.Errorf("scale %v", scale.Object)
	}
	if sel, _, _ := unstructured.NestedString(scale.Object, "status", "selector"); sel != "app=web" {
		t.Errorf("scale selector %q", sel)
	}
	scaleInProtobuf(t, cfg, "/apis/certs.example.com/v1/namespaces/default/certificates/web/scale")
	// Server-side apply: a second manager conflicts on a field the first owns.
	apply := func(manager, doc string, force bool) (*unstructured.Unstructured, error) {
		return certs.Patch(ctx, "applied", types.ApplyPatchType, []byte(doc), metav1.PatchOptions{FieldManager: manager, Force: &force})
	}
	obj, err := apply("alice", `{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"applied"},"spec":{"secretName":"a","issuerRef":{"name":"ca"},"replicas":2}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(obj.GetManagedFields()) != 1 || obj.GetManagedFields()[0].Manager != "alice" || obj.GetManagedFields()[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managedFields after apply: %v", obj.GetManagedFields())
	}
	if !strings.Contains(string(obj.GetManagedFields()[0].FieldsV1.Raw), `"f:replicas"`) {
		t.Errorf("fields of alice: %s", obj.GetManagedFields()[0].FieldsV1.Raw)
	}
	_, err = apply("bob", `{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"applied"},"spec":{"replicas":5}}`, false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice"`) || !strings.Contains(err.Error(), ".spec.replicas") {
		t.Errorf("apply conflict: %v", err)
	}
	if obj, err = apply("bob", `{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"applied"},"spec":{"replicas":5}}`, true); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); r != 5 {
		t.Errorf("forced apply: replicas %d", r)
	}

	// Finalizers hold a deletion until they are removed.
	fin := cert("held", validSpec())
	fin.SetFinalizers([]string{"example.com/hold"})
	if _, err := certs.Create(ctx, fin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := certs.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := certs.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.GetDeletionTimestamp() == nil {
		t.Fatalf("held: %v %v", err, held)
	}
	held.SetFinalizers(nil)
	if _, err := certs.Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the last finalizer: %v", err)
	}
}

func TestCustomResourceReads(t *testing.T) {
	dyn, cfg, _ := setup(t)
	ctx := context.Background()
	certs := dyn.Resource(certGVR).Namespace("default")
	w, err := certs.Watch(ctx, metav1.ListOptions{LabelSelector: "tier=front"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, tier := range []string{"front", "back", "front", "back", "front"} {
		c := cert(fmt.Sprintf("c%d", i), validSpec())
		c.SetLabels(map[string]string{"tier": tier})
		if i%2 == 1 {
			_ = unstructured.SetNestedField(c.Object, "ClusterIssuer", "spec", "issuerRef", "kind")
		}
		if _, err := certs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	timeout := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("event %v", ev.Type)
			}
			seen = append(seen, ev.Object.(*unstructured.Unstructured).GetName())
		case <-timeout:
			t.Fatalf("watch saw %v", seen)
		}
	}
	if strings.Join(seen, ",") != "c0,c2,c4" {
		t.Errorf("watch with a label selector saw %v", seen)
	}
	names := func(l *unstructured.UnstructuredList) string {
		var out []string
		for _, i := range l.Items {
			out = append(out, i.GetName())
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ label, field, want string }{
		{"tier=back", "", "c1,c3"},
		{"", "metadata.name=c2", "c2"},
		{"", "spec.issuerRef.kind=ClusterIssuer", "c1,c3"},
		{"", "spec.issuerRef.kind=Issuer", "c0,c2,c4"},
		{"tier=front", "spec.issuerRef.kind!=Issuer", ""},
	} {
		l, err := certs.List(ctx, metav1.ListOptions{LabelSelector: tc.label, FieldSelector: tc.field})
		if err != nil {
			t.Fatalf("list %q %q: %v", tc.label, tc.field, err)
		}
		if got := names(l); got != tc.want {
			t.Errorf("list %q %q = %s, want %s", tc.label, tc.field, got, tc.want)
		}
	}
	if _, err := certs.List(ctx, metav1.ListOptions{FieldSelector: "spec.secretName=s"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: spec.secretName") {
		t.Errorf("unselectable field: %v", err)
	}
	// Pages.
	page, err := certs.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	all := names(page)
	for page.GetContinue() != "" {
		if page, err = certs.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.GetContinue()}); err != nil {
			t.Fatal(err)
		}
		all += "," + names(page)
	}
	if all != "c0,c1,c2,c3,c4" {
		t.Errorf("pages: %s", all)
	}
	// Another served version reads the same objects.
	alpha, err := dyn.Resource(schema.GroupVersionResource{Group: "certs.example.com", Version: "v1alpha1", Resource: "certificates"}).Namespace("default").Get(ctx, "c0", metav1.GetOptions{})
	if err != nil || alpha.GetAPIVersion() != "certs.example.com/v1alpha1" {
		t.Errorf("v1alpha1: %v %v", err, alpha)
	}
	// Discovery, plain and aggregated.
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var group *metav1.APIGroup
	for _, g := range groups {
		if g.Name == "certs.example.com" {
			group = g
		}
	}
	if group == nil || group.PreferredVersion.Version != "v1" || len(group.Versions) != 2 {
		t.Fatalf("group %+v", group)
	}
	found := false
	for _, rl := range resources {
		for _, r := range rl.APIResources {
			if rl.GroupVersion == "certs.example.com/v1" && r.Name == "certificates" {
				found = strings.Join(r.ShortNames, ",") == "cert,certs" && strings.Join(r.Categories, ",") == "all,certs-example" && r.Namespaced && r.Kind == "Certificate"
			}
		}
	}
	if !found {
		t.Errorf("certificates missing from discovery: %v", resources)
	}
	// Deletecollection.
	if err := certs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "tier=back"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := certs.List(ctx, metav1.ListOptions{}); names(l) != "c0,c2,c4" {
		t.Errorf("after deletecollection: %s", names(l))
	}
	_ = http.StatusOK
}

func TestDeletingTheCRDRemovesItsResources(t *testing.T) {
	dyn, cfg, _ := setup(t)
	ctx := context.Background()
	certs := dyn.Resource(certGVR).Namespace("default")
	if _, err := certs.Create(ctx, cert("a", validSpec()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := cert("held", validSpec())
	held.SetFinalizers([]string{"example.com/hold"})
	if _, err := certs.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(crdGVR).Delete(ctx, "certificates.certs.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRD waits, Terminating, for the custom resource its finalizer holds; no new
	// objects meanwhile.
	eventually(t, "the CRD reports the remaining instance", func() string {
		obj, err := dyn.Resource(crdGVR).Get(ctx, "certificates.certs.example.com", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(strings.Join(obj.GetFinalizers(), ","), "customresourcecleanup.apiextensions.k8s.io") {
			return fmt.Sprint("finalizers ", obj.GetFinalizers())
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]interface{})
			if m["type"] == "Terminating" && m["status"] == "True" && m["reason"] == "InstanceDeletionCheck" {
				return ""
			}
		}
		return fmt.Sprint(conds)
	})
	if _, err := certs.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the instance without finalizers is still there: %v", err)
	}
	_, err := certs.Create(ctx, cert("late", validSpec()), metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "create not allowed while custom resource definition is terminating") {
		t.Errorf("create while terminating: %v", err)
	}
	obj, err := certs.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetFinalizers(nil)
	if _, err := certs.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD is gone", func() string {
		_, err := dyn.Resource(crdGVR).Get(ctx, "certificates.certs.example.com", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprint(err)
		}
		return ""
	})
	if _, err := certs.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the API still answers: %v", err)
	}
	groups, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	eventually(t, "the CRD's APIService is removed", func() string {
		if _, err := apiServices.Get(ctx, "v1.certs.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprint(err)
		}
		return ""
	})
	for _, g := range groups.Groups {
		if g.Name == "certs.example.com" {
			t.Errorf("the group is still discovered")
		}
	}
	// Created again, the CRD serves no object of before.
	createCRD(t, dyn, "testdata/certificates-crd.yaml")
	waitServed(t, dyn, certGVR)
	if l, err := certs.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("objects survived their CRD: %v %v", err, l)
	}
}

// TestDefaultsOnRead: a default added to the schema later shows on objects stored
// before it, as upstream defaults on every read from storage.
func TestDefaultsOnRead(t *testing.T) {
	dyn, _, _ := setup(t)
	ctx := context.Background()
	certs := dyn.Resource(certGVR).Namespace("default")
	if _, err := certs.Create(ctx, cert("old", validSpec()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/commonName/default","value":"example.com"}]`
	if _, err := dyn.Resource(crdGVR).Patch(ctx, "certificates.certs.example.com", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new default is applied on read", func() string {
		obj, err := certs.Get(ctx, "old", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if cn, _, _ := unstructured.NestedString(obj.Object, "spec", "commonName"); cn != "example.com" {
			return "commonName " + cn
		}
		return ""
	})
	l, err := certs.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatal(err)
	}
	if cn, _, _ := unstructured.NestedString(l.Items[0].Object, "spec", "commonName"); cn != "example.com" {
		t.Errorf("list: commonName %q", cn)
	}
}

// TestServedAfterRestart: an apiserver started on existing data serves the CRDs it
// finds, with their objects.
func TestServedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	srv := apiserver.StartWithDir(t, dir)
	dyn := dynamic.NewForConfigOrDie(srv.AdminConfig)
	createCRD(t, dyn, "testdata/certificates-crd.yaml")
	waitServed(t, dyn, certGVR)
	if _, err := dyn.Resource(certGVR).Namespace("default").Create(context.Background(), cert("kept", validSpec()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv = apiserver.StartWithDir(t, dir)
	dyn = dynamic.NewForConfigOrDie(srv.AdminConfig)
	eventually(t, "served after the restart", func() string {
		obj, err := dyn.Resource(certGVR).Namespace("default").Get(context.Background(), "kept", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if d, _, _ := unstructured.NestedString(obj.Object, "spec", "duration"); d != "2160h" {
			return "duration " + d
		}
		return ""
	})
}

// TestApplyListMapKeys: x-kubernetes-list-type map with its keys makes server-side
// apply merge list items by key: two managers apply a condition each, and both stay.
func TestApplyListMapKeys(t *testing.T) {
	dyn, _, _ := setup(t)
	ctx := context.Background()
	certs := dyn.Resource(certGVR).Namespace("default")
	if _, err := certs.Create(ctx, cert("web", validSpec()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	force := true
	for _, c := range []struct{ manager, condition string }{{"ready-controller", "Ready"}, {"issuing-controller", "Issuing"}} {
		doc := fmt.Sprintf(`{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"web"},"status":{"conditions":[{"type":%q,"status":"True"}]}}`, c.condition)
		if _, err := certs.Patch(ctx, "web", types.ApplyPatchType, []byte(doc), metav1.PatchOptions{FieldManager: c.manager, Force: &force}, "status"); err != nil {
			t.Fatalf("apply of %s: %v", c.condition, err)
		}
	}
	obj, err := certs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var got []string
	for _, c := range conds {
		got = append(got, c.(map[string]interface{})["type"].(string))
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "Issuing,Ready" {
		t.Errorf("conditions after two appliers: %v", conds)
	}
}

// TestDuplicateFields: duplicate fields in a body are refused with Strict and reported
// with Warn, as for built-in resources.
func TestDuplicateFields(t *testing.T) {
	_, cfg, warn := setup(t)
	client := kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient()
	body := `{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"dup"},"spec":{"secretName":"a","secretName":"b","issuerRef":{"name":"ca"}}}`
	err := client.Post().AbsPath("/apis/certs.example.com/v1/namespaces/default/certificates").Param("fieldValidation", "Strict").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `duplicate field "spec.secretName"`) {
		t.Errorf("Strict: %v", err)
	}
	err = client.Post().AbsPath("/apis/certs.example.com/v1/namespaces/default/certificates").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
	if err != nil || !strings.Contains(strings.Join(warn.got, ";"), `duplicate field "spec.secretName"`) {
		t.Errorf("Warn: %v %q", err, warn.got)
	}
}

package customresource

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"mizzen/internal/registry"
)

func certificateCRD(t testing.TB) *apiextv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("testdata/certificates-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func resources(t testing.TB) []*registry.Resource {
	t.Helper()
	rs, err := Resources(certificateCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func decode(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestResources(t *testing.T) {
	rs := resources(t)
	if len(rs) != 2 || rs[0].GroupVersion.Version != "v1" || rs[0].StorageResource != nil || rs[1].StorageResource == nil {
		t.Fatalf("resources: %+v", rs)
	}
	// A version without printer columns prints NAME and AGE, as upstream.
	if cols := rs[1].Printer.Columns; len(cols) != 2 || cols[0].Name != "Name" || cols[1].Name != "Age" || cols[1].Type != "date" {
		t.Errorf("default columns %+v", cols)
	}
	v1 := rs[0]
	if v1.Kind != "Certificate" || !v1.Namespaced || !v1.HasStatus || v1.Scale == nil || strings.Join(v1.ShortNames, ",") != "cert,certs" {
		t.Errorf("v1: %+v", v1)
	}
	obj := decode(t, `
apiVersion: certs.example.com/v1
kind: Certificate
metadata: {name: web, creationTimestamp: "2020-01-01T00:00:00Z"}
spec: {secretName: tls, replicas: 3, issuerRef: {name: ca, kind: ClusterIssuer}}
status:
  replicas: 2
  selector: app=web
  conditions: [{type: Ready, status: "True"}]
`)
	var cols []string
	for _, c := range v1.Printer.Columns {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Ready,Secret,Issuer,Replicas,Age" {
		t.Errorf("columns %v", cols)
	}
	row := v1.Printer.Row(obj)
	if row[0] != "web" || row[1] != "True" || row[2] != "tls" || row[3] != "ca" || row[4] != int64(3) || !strings.HasPrefix(row[5].(string), "6y") {
		t.Errorf("row %#v", row)
	}
	spec, status, selector := v1.Scale.Get(obj)
	if spec != 3 || status != 2 || selector != "app=web" {
		t.Errorf("scale %d %d %q", spec, status, selector)
	}
	v1.Scale.Set(obj, 7)
	if r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); r != 7 {
		t.Errorf("scale set: %d", r)
	}
	if f := v1.Fields(obj); f["spec.issuerRef.kind"] != "ClusterIssuer" {
		t.Errorf("fields %v", f)
	}
	// The other version is served from the storage version's objects.
	alpha, err := rs[1].FromStorage(obj)
	if err != nil || alpha.(*unstructured.Unstructured).GetAPIVersion() != "certs.example.com/v1alpha1" {
		t.Errorf("from storage: %v %v", alpha, err)
	}
	stored, _ := rs[1].ToStorage(alpha)
	if stored.(*unstructured.Unstructured).GetAPIVersion() != "certs.example.com/v1" {
		t.Errorf("to storage: %v", stored)
	}
}

func TestStrategy(t *testing.T) {
	v1 := resources(t)[0]
	obj := decode(t, `
apiVersion: certs.example.com/v1
kind: Certificate
metadata: {name: web}
spec: {secretName: tls, issuerRef: {name: ca}, extra: 1}
status: {replicas: 4}
`)
	if pruned := v1.Prune(obj); strings.Join(pruned, ",") != "spec.extra" {
		t.Errorf("pruned %v", pruned)
	}
	v1.Strategy.Default(obj)
	v1.Strategy.PrepareForCreate(context.Background(), obj)
	if _, found := obj.Object["status"]; found {
		t.Errorf("status kept on create")
	}
	if errs := v1.Strategy.Validate(context.Background(), obj); len(errs) > 0 {
		t.Errorf("valid object refused: %v", errs)
	}
	got, _ := json.Marshal(obj.Object["spec"])
	if string(got) != `{"duration":"2160h","issuerRef":{"kind":"Issuer","name":"ca"},"replicas":1,"secretName":"tls"}` {
		t.Errorf("defaulted spec %s", got)
	}
	obj.SetAPIVersion("certs.example.com/v2")
	if errs := v1.Strategy.Validate(context.Background(), obj); len(errs) != 1 || errs[0].Field != "apiVersion" {
		t.Errorf("wrong apiVersion: %v", errs)
	}
}

// FuzzDecode feeds arbitrary bodies through what a create does with a custom
// resource body: decode, prune, default, validate (schema and CEL). It must never
// panic, and pruning must leave nothing more to prune.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"a"},"spec":{"secretName":"s","issuerRef":{"name":"ca"}}}`))
	f.Add([]byte(`{"apiVersion":"certs.example.com/v1","kind":"Certificate","spec":{"dnsNames":[1,null,{}],"port":1.5,"privateKey":null,"secretTemplate":{"a":[[]]}},"status":{"conditions":[{}]}}`))
	f.Add([]byte(`{"kind":"Certificate","spec":{"duration":"1h","renewBefore":"1h","replicas":-1,"usages":["x"]}}`))
	f.Add([]byte(`{"kind":"Certificate","spec":"x","metadata":[]}`))
	rs, err := Resources(certificateCRD(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range rs {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				return
			}
			r.Prune(u)
			if again := r.Prune(u); len(again) > 0 {
				t.Fatalf("pruning twice removed %v", again)
			}
			r.Strategy.Default(u)
			_ = r.Strategy.Validate(context.Background(), u)
			_ = r.Strategy.ValidateUpdate(context.Background(), u, u.DeepCopy())
			if r.Printer != nil {
				_ = r.Printer.Row(u)
			}
			_, _ = r.FromStorage(u)
			if r.Fields != nil {
				_ = r.Fields(u)
			}
			if r.Scale != nil {
				r.Scale.Get(u)
			}
			var _ runtime.Object = u
			_ = metav1.Now
		}
	})
}

// BenchmarkWritePath is the schema work of one custom resource create: decode, prune,
// default, validate (kube-openapi and the CEL rule).
func BenchmarkWritePath(b *testing.B) {
	v1 := resources(b)[0]
	body := []byte(`{"apiVersion":"certs.example.com/v1","kind":"Certificate","metadata":{"name":"web","namespace":"default"},"spec":{"secretName":"web-tls","commonName":"web.example.com","dnsNames":["web.example.com","www.example.com"],"replicas":2,"port":"https","issuerRef":{"name":"ca","kind":"ClusterIssuer"}}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(body); err != nil {
			b.Fatal(err)
		}
		v1.Prune(u)
		v1.Strategy.Default(u)
		if errs := v1.Strategy.Validate(ctx, u); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

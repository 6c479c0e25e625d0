package policy_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

func TestPDBAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()

	resources, err := c.Discovery().ServerResourcesForGroupVersion("policy/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range resources.APIResources {
		if r.Name == "poddisruptionbudgets" {
			found = true
			if r.Kind != "PodDisruptionBudget" || !r.Namespaced || !reflect.DeepEqual(r.ShortNames, []string{"pdb"}) {
				t.Errorf("discovery = %+v", r)
			}
		}
	}
	if !found {
		t.Fatalf("poddisruptionbudgets not in discovery: %+v", resources.APIResources)
	}

	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	raw, err := c.PolicyV1().RESTClient().Get().Namespace("default").Resource("poddisruptionbudgets").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "web" || tbl.Rows[0].Cells[1] != "2" || tbl.Rows[0].Cells[2] != "N/A" {
		t.Errorf("rows = %+v", tbl.Rows)
	}

	both := pdb.DeepCopy()
	both.Name = "both"
	both.Spec.MaxUnavailable = &two
	_, err = c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, both, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v, want Invalid", err)
	}
	if causes := err.(apierrors.APIStatus).Status().Details.Causes; len(causes) != 1 || causes[0].Field != "spec" {
		t.Errorf("causes = %+v", causes)
	}
}

package restgroups

import (
	"bytes"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/apiserver"
)

// render prints a server-side table as kubectl get does.
func render(t *testing.T, tbl *metav1.Table, wide bool) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(tbl, &buf); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
}

// What kubectl get prints for these resources, up to the AGE values, which depend on
// when the test runs.
func TestKubectlGetOutput(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	rc := c.CoreV1().RESTClient()
	must := func(_ interface{}, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "local", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "rancher.io/local-path", VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}, metav1.CreateOptions{}))
	must(c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000,
	}, metav1.CreateOptions{}))
	must(c.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}, metav1.CreateOptions{}))
	must(c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ops"},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "ops"}},
	}, metav1.CreateOptions{}))

	tests := []struct {
		path   string
		wide   bool
		header string
		row    string // the row up to its AGE cell
		after  string // the row after its AGE cell
	}{
		{"/apis/storage.k8s.io/v1/storageclasses", false,
			"NAME              PROVISIONER             RECLAIMPOLICY   VOLUMEBINDINGMODE      ALLOWVOLUMEEXPANSION   AGE",
			"local (default)   rancher.io/local-path   Delete          WaitForFirstConsumer   false                  ", ""},
		{"/apis/scheduling.k8s.io/v1/priorityclasses", false, // the system classes print too; only "high" is checked
			"NAME   VALUE   GLOBAL-DEFAULT   AGE   PREEMPTIONPOLICY",
			"high   1000    false            ", "PreemptLowerPriority"},
		{"/apis/networking.k8s.io/v1/ingressclasses", false,
			"NAME    CONTROLLER             PARAMETERS   AGE",
			"nginx   k8s.io/ingress-nginx   <none>       ", ""},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", true, // the default policy's print too; only "ops" is checked
			"NAME   ROLE                AGE   USERS   GROUPS   SERVICEACCOUNTS",
			"ops    ClusterRole/admin   ", "alice   ops"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			tbl := table(t, rc, tt.path)
			if strings.Contains(tt.path, "priorityclasses") {
				tbl = onlyRow(tbl, "high")
			}
			if strings.Contains(tt.path, "clusterrolebindings") {
				tbl = onlyRow(tbl, "ops")
			}
			lines := render(t, tbl, tt.wide)
			if len(lines) != 2 {
				t.Fatalf("output:\n%s", strings.Join(lines, "\n"))
			}
			if strings.TrimRight(lines[0], " ") != tt.header {
				t.Errorf("header:\n%q\nwant\n%q", lines[0], tt.header)
			}
			if !strings.HasPrefix(lines[1], tt.row) {
				t.Errorf("row:\n%q\nwant it to start with\n%q", lines[1], tt.row)
			}
			if !strings.HasSuffix(strings.TrimRight(lines[1], " "), tt.after) {
				t.Errorf("row:\n%q\nwant it to end with\n%q", lines[1], tt.after)
			}
		})
	}
}

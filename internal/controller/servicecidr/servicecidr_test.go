package servicecidr

import (
	"context"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func cidr(name string, ranges ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: ranges}}
}

func TestCondition(t *testing.T) {
	def := cidr(defaultName, "10.43.0.0/16")
	for _, tt := range []struct {
		ranges []string
		want   metav1.ConditionStatus
	}{
		{[]string{"10.43.128.0/24"}, metav1.ConditionTrue},
		{[]string{"10.43.0.0/16"}, metav1.ConditionTrue},
		{[]string{"10.42.0.0/24"}, metav1.ConditionFalse},
		{[]string{"10.0.0.0/8"}, metav1.ConditionFalse}, // larger than the served range
		{[]string{"10.43.1.0/24", "fd00::/112"}, metav1.ConditionFalse},
	} {
		c := Condition(cidr("c", tt.ranges...), def)
		if c.Status != tt.want || c.Type != networkingv1.ServiceCIDRConditionReady {
			t.Errorf("%v: %+v, want %s", tt.ranges, c, tt.want)
		}
		if c.Status == metav1.ConditionFalse && c.Reason != reasonNotAllocating {
			t.Errorf("%v: reason %q", tt.ranges, c.Reason)
		}
	}
}

// The controller writes the Ready condition of a client's ServiceCIDR.
func TestControllerMarksServiceCIDRs(t *testing.T) {
	client := fake.NewSimpleClientset(cidr(defaultName, "10.43.0.0/16"), cidr("inside", "10.43.200.0/24"), cidr("outside", "192.168.0.0/24"))
	inf := informers.NewSharedInformerFactory(client, 0)
	c := New(client, inf.Networking().V1().ServiceCIDRs())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx.Done())
	go c.Run(ctx, 1)
	want := map[string]metav1.ConditionStatus{"inside": metav1.ConditionTrue, "outside": metav1.ConditionFalse}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for name, status := range want {
			sc, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
			if cond == nil || cond.Status != status {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("conditions never reached %v: %v", want, err)
	}
}

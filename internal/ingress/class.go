package ingress

import (
	"context"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// ControllerName is the spec.controller of the IngressClasses mizzen serves.
	ControllerName = "mizzen.io/ingress"
	// DefaultClassName is the IngressClass `mizzen server` creates.
	DefaultClassName = "mizzen"
	// DefaultClassAnnotation marks the IngressClass that Ingresses without a class get.
	DefaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"
	// User is the identity `mizzen server` gives its Ingress controller, bound to the
	// ClusterRole of the same name.
	User = "system:mizzen-ingress"
	// legacyClassAnnotation is the class annotation from before spec.ingressClassName,
	// which ingress-nginx still honours.
	legacyClassAnnotation = "kubernetes.io/ingress.class"
)

// classSelector decides which Ingresses are this controller's: those of the class
// named className when that IngressClass names ControllerName, and, when that class
// is marked default, those without a class.
type classSelector struct {
	className string
	class     *networkingv1.IngressClass // nil: the class does not exist, or is another controller's
}

func newClassSelector(className string, classes []*networkingv1.IngressClass) classSelector {
	s := classSelector{className: className}
	for _, c := range classes {
		if c.Name == className && c.Spec.Controller == ControllerName {
			s.class = c
		}
	}
	return s
}

func (s classSelector) isDefault() bool {
	return s.class != nil && strings.EqualFold(s.class.Annotations[DefaultClassAnnotation], "true")
}

// serves reports whether ing is this controller's to serve.
func (s classSelector) serves(ing *networkingv1.Ingress) bool {
	if ing.Spec.IngressClassName != nil {
		return s.class != nil && *ing.Spec.IngressClassName == s.className
	}
	if c, ok := ing.Annotations[legacyClassAnnotation]; ok {
		return c == s.className
	}
	return s.isDefault()
}

// EnsureDefaultClass creates the IngressClass mizzen, marked default, unless an
// IngressClass of that name exists: a class the user changed is left as it is.
func EnsureDefaultClass(ctx context.Context, client kubernetes.Interface) error {
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultClassName, Annotations: map[string]string{DefaultClassAnnotation: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: ControllerName},
	}
	_, err := client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

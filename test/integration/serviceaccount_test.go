package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/apiserver/authn"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// startWithServiceAccounts runs a control plane with the ServiceAccount admission
// plugin on, as `mizzen server` runs it.
func startWithServiceAccounts(t *testing.T) (*rest.Config, kubernetes.Interface) {
	srv := apiserver.StartWithOptions(t, func(o *core.Options) { o.DisableAdmissionPlugins = nil })
	return srv.AdminConfig, kubernetes.NewForConfigOrDie(srv.AdminConfig)
}

func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tokenClient is a client that presents only the bearer token.
func tokenClient(cfg *rest.Config, token string) kubernetes.Interface {
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	return kubernetes.NewForConfigOrDie(c)
}

func TestTokenRequest(t *testing.T) {
	cfg, c := startWithServiceAccounts(t)
	ctx := context.Background()
	sa, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: corev1.PodSpec{ServiceAccountName: "robot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onNode, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-node"},
		Spec: corev1.PodSpec{ServiceAccountName: "robot", NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherPod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issuer := core.DefaultServiceAccountIssuer

	cases := []struct {
		name       string
		sa         string
		spec       authenticationv1.TokenRequestSpec
		wantStatus int32
		wantMsg    string
		wantSecs   int64
		wantAud    []any
		wantPod    bool
		wantNode   bool
	}{
		{name: "defaults: one hour for the apiserver", sa: "robot", wantSecs: 3600, wantAud: []any{issuer}},
		{name: "audience and lifetime", sa: "robot", spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: ptr[int64](600)},
			wantSecs: 600, wantAud: []any{"vault"}},
		{name: "bound to a pod", sa: "robot", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](1200),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "worker", UID: pod.UID}},
			wantSecs: 1200, wantAud: []any{issuer}, wantPod: true},
		{name: "bound to a pod on a node", sa: "robot", spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", Name: "on-node"}},
			wantSecs: 3600, wantAud: []any{issuer}, wantNode: true},
		{name: "under ten minutes", sa: "robot", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](599)},
			wantStatus: 422, wantMsg: `TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes`},
		{name: "missing service account", sa: "nope", wantStatus: 404, wantMsg: `serviceaccounts "nope" not found`},
		{name: "stale pod UID", sa: "robot", spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "worker", UID: "not-the-uid"}},
			wantStatus: 409, wantMsg: "does not match the UID in record"},
		{name: "pod of another service account", sa: "robot", spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "other", UID: otherPod.UID}},
			wantStatus: 400, wantMsg: `cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.`},
		{name: "unsupported kind", sa: "robot", spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "x"}},
			wantStatus: 400, wantMsg: "cannot bind token to object of type /v1, Kind=ConfigMap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, tc.sa, &authenticationv1.TokenRequest{Spec: tc.spec}, metav1.CreateOptions{})
			if tc.wantStatus != 0 {
				var se apierrors.APIStatus
				if !errorsAs(err, &se) || se.Status().Code != tc.wantStatus || !strings.Contains(se.Status().Message, tc.wantMsg) {
					t.Fatalf("error = %v, want %d %q", err, tc.wantStatus, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			exp := tr.Status.ExpirationTimestamp.Time
			if d := exp.Sub(before); d < time.Duration(tc.wantSecs)*time.Second || d > time.Duration(tc.wantSecs+5)*time.Second {
				t.Errorf("expirationTimestamp %v is %v after the request, want %ds", exp, d, tc.wantSecs)
			}
			claims := jwtClaims(t, tr.Status.Token)
			if claims["iss"] != issuer || claims["sub"] != "system:serviceaccount:default:robot" {
				t.Errorf("iss/sub = %v/%v", claims["iss"], claims["sub"])
			}
			if asJSON(claims["aud"]) != asJSON(tc.wantAud) {
				t.Errorf("aud = %v, want %v", claims["aud"], tc.wantAud)
			}
			iat, nbf, expClaim := claims["iat"].(float64), claims["nbf"].(float64), claims["exp"].(float64)
			if iat != nbf || int64(expClaim-iat) != tc.wantSecs {
				t.Errorf("iat %v nbf %v exp %v: want exp = iat + %d", iat, nbf, expClaim, tc.wantSecs)
			}
			k8s, _ := claims["kubernetes.io"].(map[string]any)
			wantK8s := map[string]any{"namespace": "default", "serviceaccount": map[string]any{"name": "robot", "uid": string(sa.UID)}}
			if tc.wantPod {
				wantK8s["pod"] = map[string]any{"name": "worker", "uid": string(pod.UID)}
			}
			if tc.wantNode {
				wantK8s["pod"] = map[string]any{"name": "on-node", "uid": string(onNode.UID)}
				wantK8s["node"] = map[string]any{"name": "node-1", "uid": string(node.UID)}
			}
			if asJSON(k8s) != asJSON(wantK8s) {
				t.Errorf("kubernetes.io = %s, want %s", asJSON(k8s), asJSON(wantK8s))
			}
		})
	}

	// Authentication with the tokens.
	issue := func(spec authenticationv1.TokenRequestSpec) string {
		tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	bound := issue(authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "worker", UID: pod.UID}})
	forVault := issue(authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})

	// Who the token authenticates as (kubectl auth whoami, which every authenticated
	// user may ask); and, with RBAC on, a role of its own lets the robot list pods below.
	whoami, err := tokenClient(cfg, bound).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request with a bound token: %v", err)
	}
	if u := whoami.Status.UserInfo; u.Username != "system:serviceaccount:default:robot" || u.UID != string(sa.UID) ||
		asJSON(u.Groups) != `["system:serviceaccounts","system:serviceaccounts:default","system:authenticated"]` {
		t.Errorf("authenticated as %q (uid %q) in %v", u.Username, u.UID, u.Groups)
	}
	grantPodList(ctx, t, c, "default", "robot")
	if _, err := tokenClient(cfg, forVault).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("token for another audience: err = %v, want 401", err)
	}
	if _, err := tokenClient(cfg, bound+"x").CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("token with a broken signature: err = %v, want 401", err)
	}
	if err := c.CoreV1().Pods("default").Delete(ctx, "worker", metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there after deletion: %v", err)
	}
	// Refused once the server's memory of the token's last success expires (as
	// upstream's), and the watch cache has seen the delete.
	deadline := time.Now().Add(authn.TokenSuccessTTL + 10*time.Second)
	for {
		_, err := tokenClient(cfg, bound).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token of a deleted pod still accepted: err = %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Once its service account is gone (here recreated, with another UID), a token is
	// refused.
	plain := issue(authenticationv1.TokenRequestSpec{})
	if _, err := tokenClient(cfg, plain).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("unbound token before its account is deleted: %v", err)
	}
	if err := c.CoreV1().ServiceAccounts("default").Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(authn.TokenSuccessTTL + 10*time.Second)
	for {
		_, err := tokenClient(cfg, plain).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token of a deleted service account still accepted: err = %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// OpenID discovery.
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var oidc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &oidc); err != nil || oidc.Issuer != issuer || !strings.HasSuffix(oidc.JWKSURI, "/openid/v1/jwks") {
		t.Errorf("openid-configuration %s (%v)", body, err)
	}
	keys, err := c.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil || !strings.Contains(string(keys), `"alg":"RS256"`) {
		t.Errorf("jwks %s (%v)", keys, err)
	}
}

func errorsAs(err error, target *apierrors.APIStatus) bool {
	se, ok := err.(apierrors.APIStatus)
	if ok {
		*target = se
	}
	return ok
}

// grantPodList lets a service account list the pods of its namespace, and waits until
// the authorizer has the new binding.
func grantPodList(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, sa string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-lister"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-lister"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-lister"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":" + sa, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: ns}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binding of %s/%s does not apply", ns, sa)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServiceAccountAdmission(t *testing.T) {
	_, c := startWithServiceAccounts(t)
	ctx := context.Background()
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, AutomountServiceAccountToken: ptr(false)},
	} {
		if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	cases := []struct {
		name        string
		sa          string
		podOptOut   *bool
		mirror      bool
		ownMount    bool
		wantSA      string
		wantVolume  bool
		wantErrCode int32
		wantErrMsg  string
	}{
		{name: "default account and token volume", wantSA: "default", wantVolume: true},
		{name: "pod opts out", podOptOut: ptr(false), wantSA: "default"},
		{name: "account opts out", sa: "quiet", wantSA: "quiet"},
		{name: "pod overrides its account", sa: "quiet", podOptOut: ptr(true), wantSA: "quiet", wantVolume: true},
		{name: "container mounts the path itself", ownMount: true, wantSA: "default"},
		{name: "missing account", sa: "ghost", wantErrCode: 403,
			wantErrMsg: `pods "p" is forbidden: error looking up service account default/ghost: serviceaccount "ghost" not found`},
		{name: "mirror pod is left alone", mirror: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
				ServiceAccountName: tc.sa, AutomountServiceAccountToken: tc.podOptOut,
				InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
				Containers:     []corev1.Container{{Name: "a", Image: "busybox"}, {Name: "b", Image: "busybox"}},
			}}
			if tc.wantErrCode == 0 {
				pod.Name = "p" + string(rune('a'+i))
			}
			if tc.mirror {
				pod.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
				pod.Spec.NodeName = "n1"
			}
			if tc.ownMount {
				pod.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: tokenDir}}
			}
			got, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			if tc.wantErrCode != 0 {
				var se apierrors.APIStatus
				if !errorsAs(err, &se) || se.Status().Code != tc.wantErrCode || se.Status().Message != tc.wantErrMsg {
					t.Fatalf("error = %v, want %d %q", err, tc.wantErrCode, tc.wantErrMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.ServiceAccountName != tc.wantSA || got.Spec.DeprecatedServiceAccount != tc.wantSA {
				t.Errorf("serviceAccountName = %q (deprecated %q), want %q", got.Spec.ServiceAccountName, got.Spec.DeprecatedServiceAccount, tc.wantSA)
			}
			var vol *corev1.Volume
			for i := range got.Spec.Volumes {
				if strings.HasPrefix(got.Spec.Volumes[i].Name, "kube-api-access-") {
					vol = &got.Spec.Volumes[i]
				}
			}
			if (vol != nil) != tc.wantVolume {
				t.Fatalf("kube-api-access volume present = %v, want %v (volumes %v)", vol != nil, tc.wantVolume, got.Spec.Volumes)
			}
			if vol == nil {
				return
			}
			if len(vol.Name) != len("kube-api-access-")+5 {
				t.Errorf("volume name %q, want kube-api-access- and 5 characters", vol.Name)
			}
			want := `{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},` +
				`{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},` +
				`{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}`
			if asJSON(vol.Projected) != want {
				t.Errorf("projected = %s\nwant %s", asJSON(vol.Projected), want)
			}
			for _, ctr := range append(got.Spec.InitContainers, got.Spec.Containers...) {
				wantMount := corev1.VolumeMount{Name: vol.Name, MountPath: tokenDir, ReadOnly: true}
				if n := len(ctr.VolumeMounts); n == 0 || asJSON(ctr.VolumeMounts[n-1]) != asJSON(wantMount) {
					t.Errorf("container %s mounts %v, want %v", ctr.Name, ctr.VolumeMounts, wantMount)
				}
			}
		})
	}
}

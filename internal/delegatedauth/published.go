package delegatedauth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMap where the apiserver publishes whom servers delegating to it should
// trust: its client CA (client-ca-file) and its front proxy's (requestheader-*).
const (
	AuthenticationNamespace = "kube-system"
	AuthenticationConfigMap = "extension-apiserver-authentication"
)

// CertSources override what the apiserver publishes, as upstream's --client-ca-file
// and --requestheader-* flags.
type CertSources struct {
	ClientCAFile              string
	RequestHeaderClientCAFile string
	RequestHeaderAllowedNames []string
	// TolerateLookupFailure goes on without the published ConfigMap when it is missing
	// or may not be read (client certificates are then not accepted, unless the files
	// above name their CAs), as upstream's --authentication-tolerate-lookup-failure,
	// which kube-scheduler and kube-controller-manager turn on. Otherwise that is an
	// error unless RequestHeaderClientCAFile is given.
	TolerateLookupFailure bool
}

// LoadCertAuthenticator builds the certificate authenticator from the sources,
// completed from the apiserver's published ConfigMap. It also returns every CA it
// trusts, for the TLS handshake to ask for a certificate of one of them.
func LoadCertAuthenticator(ctx context.Context, client kubernetes.Interface, src CertSources) (*CertAuthenticator, []byte, error) {
	data := map[string]string{}
	cm, err := client.CoreV1().ConfigMaps(AuthenticationNamespace).Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		data = cm.Data
	case src.TolerateLookupFailure:
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		if src.RequestHeaderClientCAFile == "" {
			return nil, nil, fmt.Errorf("%s/%s: %w (give --requestheader-client-ca-file instead)", AuthenticationNamespace, AuthenticationConfigMap, err)
		}
	default:
		return nil, nil, err
	}
	read := func(file, key string) ([]byte, error) {
		if file != "" {
			return os.ReadFile(file)
		}
		return []byte(data[key]), nil
	}
	jsonList := func(key string, def []string) []string {
		var out []string
		if err := json.Unmarshal([]byte(data[key]), &out); err != nil || len(out) == 0 {
			return def
		}
		return out
	}
	a := &CertAuthenticator{}
	clientCA, err := read(src.ClientCAFile, "client-ca-file")
	if err != nil {
		return nil, nil, err
	}
	if len(clientCA) > 0 {
		if a.ClientCAs, err = NewPool(clientCA); err != nil {
			return nil, nil, fmt.Errorf("client CA: %w", err)
		}
	}
	frontCA, err := read(src.RequestHeaderClientCAFile, "requestheader-client-ca-file")
	if err != nil {
		return nil, nil, err
	}
	if len(frontCA) > 0 {
		rh := &RequestHeaderConfig{
			AllowedNames:    jsonList("requestheader-allowed-names", nil),
			UsernameHeaders: jsonList("requestheader-username-headers", []string{"X-Remote-User"}),
			GroupHeaders:    jsonList("requestheader-group-headers", []string{"X-Remote-Group"}),
			ExtraPrefixes:   jsonList("requestheader-extra-headers-prefix", []string{"X-Remote-Extra-"}),
		}
		if src.RequestHeaderAllowedNames != nil {
			rh.AllowedNames = src.RequestHeaderAllowedNames
		}
		if rh.CAs, err = NewPool(frontCA); err != nil {
			return nil, nil, fmt.Errorf("request header CA: %w", err)
		}
		a.RequestHeader = rh
	}
	return a, append(append([]byte{}, clientCA...), frontCA...), nil
}

// NewPool is a pool of the PEM certificates; none is an empty pool, never the system's.
func NewPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if len(pemData) > 0 && !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no PEM certificate")
	}
	return pool, nil
}

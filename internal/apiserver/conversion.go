package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"

	"mizzen/internal/registry/customresource"
)

// conversionTimeout bounds one call of a conversion webhook, as upstream's 30 s.
const conversionTimeout = 30 * time.Second

// converterFor returns the conversion of a CRD with conversion Webhook: each object
// read or written in another version than it is stored in is sent to the webhook in a
// ConversionReview (v1, or v1beta1 when the CRD accepts only that), over HTTPS verified
// with the webhook's caBundle. Nil for conversion None.
func (s *Server) converterFor(crd *apiextv1.CustomResourceDefinition) customresource.Converter {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return nil
	}
	cc := c.Webhook.ClientConfig.DeepCopy()
	reviewVersion := "v1"
	if !contains(c.Webhook.ConversionReviewVersions, "v1") {
		reviewVersion = "v1beta1"
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cc.CABundle)
		tlsConfig.RootCAs = pool
	}
	if cc.Service != nil {
		tlsConfig.ServerName = cc.Service.Name + "." + cc.Service.Namespace + ".svc"
	}
	client := &http.Client{Timeout: conversionTimeout, Transport: &http.Transport{
		TLSClientConfig:     tlsConfig,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
	}}
	name := crd.Name
	return func(ctx context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
		out, err := s.convertWithWebhook(ctx, client, cc, reviewVersion, obj, apiVersion)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: %v", name, err))
		}
		return out, nil
	}
}

func (s *Server) webhookURL(ctx context.Context, cc *apiextv1.WebhookClientConfig) (string, error) {
	if cc.URL != nil {
		return *cc.URL, nil
	}
	ref := cc.Service
	sh := s.handlers[servicesGVR]
	if sh == nil {
		return "", fmt.Errorf("services are not served")
	}
	obj, err := s.getObject(ctx, sh, ref.Namespace, ref.Name, "")
	if err != nil {
		return "", err
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	host, err := s.serviceEndpoint(ctx, obj.(*corev1.Service), strconv.Itoa(int(port)), ref.Name, false)
	if err != nil {
		return "", err
	}
	u := url.URL{Scheme: "https", Host: host}
	if ref.Path != nil {
		u.Path = *ref.Path
	}
	return u.String(), nil
}

func (s *Server) convertWithWebhook(ctx context.Context, client *http.Client, cc *apiextv1.WebhookClientConfig, reviewVersion string, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
	target, err := s.webhookURL(ctx, cc)
	if err != nil {
		return nil, err
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	uid := uuid.NewUUID()
	review := apiextv1.ConversionReview{Request: &apiextv1.ConversionRequest{UID: uid, DesiredAPIVersion: apiVersion, Objects: []runtime.RawExtension{{Raw: raw}}}}
	review.APIVersion, review.Kind = "apiextensions.k8s.io/"+reviewVersion, "ConversionReview"
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, conversionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server responded with status %d", resp.StatusCode)
	}
	var answer apiextv1.ConversionReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("the response is not a ConversionReview: %v", err)
	}
	r := answer.Response
	switch {
	case r == nil:
		return nil, fmt.Errorf("no response provided")
	case r.UID != uid:
		return nil, fmt.Errorf("expected response uid %q, got %q", uid, r.UID)
	case r.Result.Status != "Success":
		return nil, fmt.Errorf("conversion failed: %s", r.Result.Message)
	case len(r.ConvertedObjects) != 1:
		return nil, fmt.Errorf("expected 1 converted objects, got %d", len(r.ConvertedObjects))
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(r.ConvertedObjects[0].Raw); err != nil {
		return nil, fmt.Errorf("invalid converted object: %v", err)
	}
	if out.GetAPIVersion() != apiVersion {
		return nil, fmt.Errorf("invalid converted object: expected apiVersion %q, got %q", apiVersion, out.GetAPIVersion())
	}
	if out.GetKind() != obj.GetKind() {
		return nil, fmt.Errorf("invalid converted object: expected kind %q, got %q", obj.GetKind(), out.GetKind())
	}
	// As upstream, a webhook may change labels and annotations only: the rest of the
	// metadata is the object's own.
	meta, _, _ := unstructured.NestedMap(obj.Object, "metadata")
	if meta == nil {
		meta = map[string]interface{}{}
	}
	if labels := out.GetLabels(); labels != nil {
		meta["labels"] = toInterfaceMap(labels)
	} else {
		delete(meta, "labels")
	}
	if ann := out.GetAnnotations(); ann != nil {
		meta["annotations"] = toInterfaceMap(ann)
	} else {
		delete(meta, "annotations")
	}
	out.Object["metadata"] = meta
	return out, nil
}

func toInterfaceMap(m map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

package volume

import (
	"context"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// clusterTrustBundlePayload is the file of a clusterTrustBundle projection: one
// bundle's trust anchors by name, or those of every bundle of a signer whose labels
// match the selector (a nil selector matches none, an empty one all), each
// certificate once. Nothing found is an error unless the source is optional, which
// then gets an empty file, as upstream's kubelet writes it.
func (m *Manager) clusterTrustBundlePayload(ctx context.Context, src *v1.ClusterTrustBundleProjection, defMode *int32) (payload, error) {
	var bundles []string
	switch {
	case src.Name != nil:
		ctb, err := m.opts.Sources.ClusterTrustBundle(ctx, *src.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			bundles = append(bundles, ctb.Spec.TrustBundle)
		}
	case src.SignerName != nil:
		selector := labels.Nothing()
		if src.LabelSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("while parsing label selector: %w", err)
			}
			selector = s
		}
		all, err := m.opts.Sources.ClusterTrustBundles(ctx, *src.SignerName)
		if err != nil {
			return nil, err
		}
		for i := range all {
			if all[i].Spec.SignerName == *src.SignerName && selector.Matches(labels.Set(all[i].Labels)) {
				bundles = append(bundles, all[i].Spec.TrustBundle)
			}
		}
	default:
		return nil, fmt.Errorf("clusterTrustBundle projection names neither a bundle nor a signer")
	}
	anchors := trustAnchors(bundles)
	if len(anchors) == 0 && !isTrue(src.Optional) {
		if src.Name != nil {
			return nil, fmt.Errorf("while getting ClusterTrustBundle %q: %w", *src.Name,
				apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), *src.Name))
		}
		return nil, fmt.Errorf("combined trust anchor set for signer %q and selector was empty", *src.SignerName)
	}
	return payload{src.Path: file{data: anchors, mode: fileMode(nil, defMode)}}, nil
}

// trustAnchors joins the certificates of the bundles, in order, without repeating
// one, re-encoded without headers or what lay between them.
func trustAnchors(bundles []string) []byte {
	var out []byte
	seen := map[string]bool{}
	for _, b := range bundles {
		for _, der := range certificateBlocks(b) {
			if !seen[string(der)] {
				seen[string(der)] = true
				out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
			}
		}
	}
	return out
}

// certificateBlocks is the contents of the CERTIFICATE PEM blocks of s, in order.
func certificateBlocks(s string) [][]byte {
	var out [][]byte
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type == "CERTIFICATE" {
			out = append(out, block.Bytes)
		}
	}
}

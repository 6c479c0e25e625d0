package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The words upstream's agnhost webhook looks for and answers with.
const (
	disallowedValue     = "webhook-disallow"
	disallowedKey       = "webhook-e2e-test"
	toBeMutatedPod      = "webhook-to-be-mutated"
	addedLabelKey       = "added-label"
	addedInitContainer  = "webhook-added-init-container"
	addedInitImage      = "webhook-added-image"
	alwaysDenyMessage   = "this webhook denies all requests"
	unwantedConfigMap   = "the configmap contains unwanted key and value"
	unwantedPodLabel    = "the pod contains unwanted label; "
	unwantedPodContainr = "the pod contains unwanted container name; "
)

// runWebhook serves admission webhooks over TLS, as upstream agnhost's webhook
// subcommand: /always-allow-delay-5s, /always-deny, /add-label, /pods, /configmaps,
// /mutating-configmaps, /mutating-pods and /readyz.
func runWebhook(args []string, stdout, stderr io.Writer) int {
	return serveTLS("webhook", "admission webhooks", webhookMux(), args, stdout, stderr)
}

// serveTLS serves mux over TLS with the --tls-cert-file, --tls-private-key-file and
// --port flags upstream's webhook subcommands share.
func serveTLS(name, what string, mux http.Handler, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(name, stderr)
	certFile := fs.String("tls-cert-file", "", "file with the serving certificate (PEM)")
	keyFile := fs.String("tls-private-key-file", "", "file with the serving certificate's key (PEM)")
	port := fs.Int("port", 443, "secure port")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	srv := &http.Server{Addr: fmt.Sprintf(":%d", *port), Handler: mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	fmt.Fprintf(stdout, "Serving %s on port %d\n", what, *port)
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func webhookMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.Handle("/always-allow-delay-5s", review(func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		time.Sleep(5 * time.Second)
		return allow()
	}))
	mux.Handle("/always-deny", review(func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return deny(alwaysDenyMessage)
	}))
	mux.Handle("/add-label", review(addLabel))
	mux.Handle("/pods", review(admitPod))
	mux.Handle("/configmaps", review(admitConfigMap))
	mux.Handle("/mutating-configmaps", review(mutateConfigMap))
	mux.Handle("/mutating-pods", review(mutatePod))
	return mux
}

// review decodes an AdmissionReview, answers it with respond, and echoes its uid.
func review(respond func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, fmt.Sprintf("bad AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		resp := respond(in.Request)
		resp.UID = in.Request.UID
		out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: msg}}
}

func patched(ops []map[string]any) *admissionv1.AdmissionResponse {
	if len(ops) == 0 {
		return allow()
	}
	data, _ := json.Marshal(ops)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: data}
}

func addLabel(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return deny(err.Error())
	}
	if obj.Labels == nil {
		return patched([]map[string]any{{"op": "add", "path": "/metadata/labels", "value": map[string]string{addedLabelKey: "yes"}}})
	}
	return patched([]map[string]any{{"op": "add", "path": "/metadata/labels/" + addedLabelKey, "value": "yes"}})
}

func admitPod(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(err.Error())
	}
	msg := ""
	if pod.Labels[disallowedKey] == disallowedValue {
		msg += unwantedPodLabel
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == disallowedValue {
			msg += unwantedPodContainr
		}
	}
	if msg != "" {
		return deny(msg)
	}
	return allow()
}

func admitConfigMap(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
		return deny(err.Error())
	}
	for k, v := range cm.Data {
		if k == disallowedKey && v == disallowedValue {
			return deny(unwantedConfigMap)
		}
	}
	return allow()
}

func mutateConfigMap(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
		return deny(err.Error())
	}
	if cm.Data == nil {
		return patched([]map[string]any{{"op": "add", "path": "/data", "value": map[string]string{"mutation-stage-1": "yes"}}})
	}
	if _, ok := cm.Data["mutation-stage-1"]; !ok {
		return patched([]map[string]any{{"op": "add", "path": "/data/mutation-stage-1", "value": "yes"}})
	}
	if _, ok := cm.Data["mutation-stage-2"]; !ok {
		return patched([]map[string]any{{"op": "add", "path": "/data/mutation-stage-2", "value": "yes"}})
	}
	return allow()
}

func mutatePod(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(err.Error())
	}
	if pod.Name != toBeMutatedPod {
		return allow()
	}
	return patched([]map[string]any{{"op": "add", "path": "/spec/initContainers", "value": []map[string]any{
		{"image": addedInitImage, "name": addedInitContainer, "resources": map[string]any{}},
	}}})
}

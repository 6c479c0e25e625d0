package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// runCRDConversionWebhook serves ConversionReview v1 over TLS on /crdconvert, as
// upstream agnhost's crd-conversion-webhook subcommand: custom resources of
// stable.example.com convert between v1 (spec-less `hostPort: "host:port"`) and v2
// (`host` and `port`), the example upstream's CRD conversion e2e tests use.
func runCRDConversionWebhook(args []string, stdout, stderr io.Writer) int {
	return serveTLS("crd-conversion-webhook", "CRD conversion", conversionMux(), args, stdout, stderr)
}

func conversionMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/crdconvert", serveConversion)
	return mux
}

// serveConversion answers a ConversionReview: every object converted to the desired
// version, or a Failure naming the first that could not be.
func serveConversion(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("bad ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		converted, err := convertExample(obj, review.Request.DesiredAPIVersion)
		if err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			resp.ConvertedObjects = nil
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Object: converted})
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// convertExample converts between stable.example.com/v1's hostPort and v2's host and
// port, as upstream's example converter.
func convertExample(obj *unstructured.Unstructured, toVersion string) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	from := obj.GetAPIVersion()
	if from == toVersion {
		return nil, fmt.Errorf("conversion from a version to itself should not call the webhook: %s", toVersion)
	}
	switch from {
	case "stable.example.com/v1":
		if toVersion != "stable.example.com/v2" {
			return nil, fmt.Errorf("unexpected conversion version %q", toVersion)
		}
		if hostPort, ok := out.Object["hostPort"]; ok {
			parts := strings.Split(fmt.Sprint(hostPort), ":")
			if len(parts) != 2 {
				return nil, fmt.Errorf("invalid hostPort value `%v`", hostPort)
			}
			out.Object["host"], out.Object["port"] = parts[0], parts[1]
			delete(out.Object, "hostPort")
		}
	case "stable.example.com/v2":
		if toVersion != "stable.example.com/v1" {
			return nil, fmt.Errorf("unexpected conversion version %q", toVersion)
		}
		host, hasHost := out.Object["host"]
		port, hasPort := out.Object["port"]
		if hasHost || hasPort {
			if !hasHost {
				host = ""
			}
			if !hasPort {
				port = ""
			}
			out.Object["hostPort"] = fmt.Sprintf("%s:%s", host, port)
			delete(out.Object, "host")
			delete(out.Object, "port")
		}
	default:
		return nil, fmt.Errorf("unexpected conversion version %q", from)
	}
	out.SetAPIVersion(toVersion)
	return out, nil
}

package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"
)

// Media types the server reads and writes.
const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// maxBodyBytes bounds request bodies, as upstream's 3 MiB limit does.
const maxBodyBytes = 3 << 20

// codecs holds one serializer per media type, built once.
type codecs struct {
	json, jsonStrict, yaml, yamlStrict runtime.Serializer
	protobuf, protobufRaw              runtime.Serializer
	jsonFramer, protobufFramer         runtime.Framer
}

func newCodecs(scheme *runtime.Scheme) *codecs {
	return &codecs{
		json:           json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
		jsonStrict:     json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Strict: true}),
		yaml:           json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true}),
		yamlStrict:     json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true}),
		protobuf:       protobuf.NewSerializer(scheme, scheme),
		protobufRaw:    protobuf.NewRawSerializer(scheme, scheme),
		jsonFramer:     json.Framer,
		protobufFramer: protobuf.LengthDelimitedFramer,
	}
}

// outputFormat is what the client asked for in Accept.
type outputFormat struct {
	mediaType string
	// as is "", "Table", "PartialObjectMetadata" or "PartialObjectMetadataList".
	as string
	// asVersion is the meta.k8s.io version of the as type (v1 or v1beta1).
	asVersion string
}

func (c *codecs) serializer(mediaType string) runtime.Serializer {
	switch mediaType {
	case mediaYAML:
		return c.yaml
	case mediaProtobuf:
		return c.protobuf
	default:
		return c.json
	}
}

// negotiate picks the first acceptable entry of the Accept header. allowAs says whether
// the endpoint can answer as Table or PartialObjectMetadata.
func negotiate(r *http.Request, allowAs bool) (outputFormat, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return outputFormat{mediaType: mediaJSON}, nil
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		switch mt {
		case "*/*", "application/*", mediaJSON, "application/json-seq":
			mt = mediaJSON
		case mediaYAML, mediaProtobuf:
		default:
			continue
		}
		as := params["as"]
		if as != "" {
			if !allowAs || params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
			default:
				continue
			}
		}
		return outputFormat{mediaType: mt, as: as, asVersion: params["v"]}, nil
	}
	return outputFormat{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 0, false)
}

// readBody reads at most maxBodyBytes of the request body.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBodyBytes {
		return nil, bodyTooLarge()
	}
	data, err := readAllSized(io.LimitReader(r.Body, maxBodyBytes+1), r.ContentLength)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, bodyTooLarge()
	}
	return data, nil
}

func bodyTooLarge() error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
}

// readAllSized is io.ReadAll starting from a buffer of the announced size (clients
// send Content-Length), where io.ReadAll starts at 512 bytes and grows: a 1.2 KB pod
// costs it four buffers. One byte more leaves room to read the end without growing.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// requestMediaType returns the Content-Type's media type, defaulting to JSON.
func requestMediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return mediaJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

// decodeInto decodes a create or update body into into. Unknown or duplicate fields are
// reported in strictErr (the caller applies fieldValidation); any other problem is a
// 400 or 415 status error.
func (c *codecs) decodeInto(mediaType string, data []byte, defaults schema.GroupVersionKind, into runtime.Object) (strictErr error, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	var ser runtime.Serializer
	switch mediaType {
	case mediaJSON:
		ser = c.jsonStrict
	case mediaYAML, "application/x-yaml", "text/yaml":
		ser = c.yamlStrict
	case mediaProtobuf:
		ser = c.protobuf
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got %q", mediaType), 0, false)
	}
	obj, gvk, derr := ser.Decode(data, &defaults, into)
	if derr != nil && mediaType != mediaProtobuf && runtime.IsNotRegisteredError(derr) {
		// Say what upstream says when the body names another group or version.
		var tm metav1.TypeMeta
		if yaml.Unmarshal(data, &tm) == nil && tm.APIVersion != "" && tm.APIVersion != defaults.GroupVersion().String() {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, defaults.GroupVersion().String()))
		}
	}
	if derr != nil {
		if runtime.IsStrictDecodingError(derr) && obj == into {
			strictErr = derr
		} else {
			return nil, apierrors.NewBadRequest(decodeErrorMessage(derr, defaults))
		}
	}
	if gvk != nil && (gvk.GroupVersion() != defaults.GroupVersion()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion().String(), defaults.GroupVersion().String()))
	}
	if gvk != nil && gvk.Kind != defaults.Kind || obj != into {
		got := ""
		if gvk != nil {
			got = gvk.Kind
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the kind in the data does not match the kind of the resource", got, defaults.Version, defaults.Kind))
	}
	return strictErr, nil
}

func decodeErrorMessage(err error, gvk schema.GroupVersionKind) string {
	msg := err.Error()
	if runtime.IsNotRegisteredError(err) || runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) {
		return msg
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", gvk.Kind, gvk.Version, gvk.Kind, msg)
}

package util

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/protodecode"
)

// CreatePod creates pod in its namespace and returns the name the apiserver gave it,
// which is all a controller creating pods from a template reads of the answer (for
// its SuccessfulCreate event). client-go's typed Create decodes the whole created
// pod; with 10,000 pods created that decoding was ~3% of the controller-manager's
// CPU and ~6% of its allocations, so the name is read from the answer's bytes
// instead. A client without a REST client behind it (client-go's fakes) gets the
// typed call.
func CreatePod(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) (string, error) {
	rc, _ := client.CoreV1().RESTClient().(*rest.RESTClient)
	if rc == nil {
		created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return created.Name, nil
	}
	meta, err := postForMeta(ctx, rc.Post().Namespace(pod.Namespace).Resource("pods").Body(pod))
	return meta.name, err
}

// postForMeta sends req, a create, and reads the created object's name and
// resourceVersion from the answer.
func postForMeta(ctx context.Context, req *rest.Request) (createdMeta, error) {
	var contentType string
	res := req.Do(ctx).ContentType(&contentType)
	if err := res.Error(); err != nil {
		return createdMeta{}, err
	}
	body, _ := res.Raw()
	return readCreated(body, contentType)
}

// createdMeta is what is read of a create's answer.
type createdMeta struct {
	name, resourceVersion string
}

// readCreated reads metadata.name and metadata.resourceVersion from an answer
// holding one object, protobuf or JSON as contentType says. An object without a
// name is an error.
func readCreated(body []byte, contentType string) (createdMeta, error) {
	if mediaType, _, _ := mime.ParseMediaType(contentType); mediaType == runtime.ContentTypeProtobuf {
		meta, ok := protobufMeta(body)
		if !ok || meta.name == "" {
			return createdMeta{}, fmt.Errorf("the apiserver's protobuf answer to a create holds no object with a name (%d bytes)", len(body))
		}
		return meta, nil
	}
	var obj struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return createdMeta{}, fmt.Errorf("decoding the apiserver's answer to a create: %w", err)
	}
	if obj.Metadata.Name == "" {
		return createdMeta{}, fmt.Errorf("the apiserver's answer to a create holds no object with a name (%d bytes)", len(body))
	}
	return createdMeta{name: obj.Metadata.Name, resourceVersion: obj.Metadata.ResourceVersion}, nil
}

// protobufMeta reads metadata's name and resourceVersion from a protobuf answer: the
// envelope's runtime.Unknown holds the object's message in field 2 (raw), whose field
// 1 is its ObjectMeta, whose fields 1 and 6 are the name and the resourceVersion. As
// protobuf decodes, repeated occurrences of a message merge and the last value wins.
func protobufMeta(body []byte) (createdMeta, bool) {
	unknown, ok := bytes.CutPrefix(body, protodecode.Prefix)
	if !ok {
		return createdMeta{}, false
	}
	var meta createdMeta
	found := false
	for _, raw := range bytesFields(unknown, 2) {
		for _, m := range bytesFields(raw, 1) {
			found = true
			for _, n := range bytesFields(m, 1) {
				meta.name = string(n)
			}
			for _, rv := range bytesFields(m, 6) {
				meta.resourceVersion = string(rv)
			}
		}
	}
	return meta, found
}

// bytesFields returns the values of msg's length-delimited field num in order, none
// when msg is not a well-formed message.
func bytesFields(msg []byte, num protowire.Number) [][]byte {
	var values [][]byte
	wellFormed := protodecode.EachField(msg, func(n protowire.Number, typ protowire.Type, value []byte) bool {
		if n == num && typ == protowire.BytesType {
			values = append(values, value)
		}
		return true
	})
	if !wellFormed {
		return nil
	}
	return values
}

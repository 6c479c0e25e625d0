package util

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// DefaultHashLabelKey is the label a Deployment puts on its ReplicaSets and their pods.
const DefaultHashLabelKey = "pod-template-hash"

// ComputeHash returns the pod-template-hash of template: an FNV-32a over a stable
// printing of the template and, when set, the collision count, encoded with the
// apimachinery "safe" alphabet so it can be a name suffix and a label value.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	DeepHashObject(h, *template)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// DeepHashObject writes a deterministic printing of obj (map keys sorted, pointers
// followed) into w, so equal objects hash equally.
func DeepHashObject(w interface{ Write([]byte) (int, error) }, obj any) {
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	printer.Fprintf(w, "%#v", obj)
}

package registry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Age renders how long ago t was, as the AGE column prints it ("5m", "3d4h"), or
// "<unknown>" for a zero time, as upstream does.
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// NameColumn and AgeColumn are the two columns every printer has, worded as upstream.
var (
	NameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
		Description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"}
	AgeColumn = metav1.TableColumnDefinition{Name: "Age", Type: "string",
		Description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}
)

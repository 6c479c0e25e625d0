// Package batch describes the batch/v1 resources for the apiserver: jobs and cronjobs,
// with their defaulting (including the selector a job generates from its uid),
// validation, field selectors and printing.
package batch

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/registry"
)

// Resources returns the batch/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{Jobs(), CronJobs()}
}

// The wide columns every workload printer shares, worded as upstream.
var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1,
		Description: "Names of each container in the template."}
	imagesColumn = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1,
		Description: "Images referenced by each container in the template."}
)

// containerCells lays out container names and images, comma separated.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, 0, len(containers))
	im := make([]string, 0, len(containers))
	for _, c := range containers {
		n = append(n, c.Name)
		im = append(im, c.Image)
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func ptr[T any](v T) *T { return &v }

var _ registry.StatusStrategy = jobStrategy{}

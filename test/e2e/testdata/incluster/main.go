// Command incluster is a test program run inside a pod: it builds its client the way
// in-cluster clients do (rest.InClusterConfig: the service account token and CA of the
// kube-api-access volume, KUBERNETES_SERVICE_HOST and _PORT) and prints, every second,
// a value from the ConfigMap named by its first argument in its own namespace.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: incluster CONFIGMAP KEY")
		os.Exit(2)
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		fmt.Println(once(strings.TrimSpace(string(ns)), os.Args[1], os.Args[2]))
		time.Sleep(time.Second)
	}
}

func once(ns, name, key string) string {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return "incluster error: " + err.Error()
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "incluster error: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "incluster error: " + err.Error()
	}
	return "incluster " + key + "=" + cm.Data[key]
}

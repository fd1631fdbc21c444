// Command chartcheck decodes every manifest that `helm template` rendered, strictly, into the
// Kubernetes API type its apiVersion and kind name (k8s.io/api), offline: an unknown field, a
// field of the wrong type or a kind this chart should not render fails, naming the document.
// Custom resources (KEDA's ScaledObject, the Prometheus operator's ServiceMonitor and
// PrometheusRule) are decoded into the parts of their schemas the chart uses (crds.go).
//
//	chartcheck RENDERED.yaml...
package main

import (
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck RENDERED.yaml...")
		os.Exit(2)
	}
	failed := 0
	for _, path := range os.Args[1:] {
		text, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartcheck: %v\n", err)
			os.Exit(2)
		}
		docs, err := Decode(string(text))
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartcheck: %s: %v\n", path, err)
			failed++
			continue
		}
		fmt.Printf("chartcheck: %s: %d manifests match their API types\n", path, len(docs))
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// Manifest is one rendered document, decoded into its API type.
type Manifest struct {
	Kind   string
	Name   string
	Object any
}

// Decode splits a rendered chart into its documents and decodes each strictly.
func Decode(rendered string) ([]Manifest, error) {
	var manifests []Manifest
	for i, doc := range split(rendered) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("document %d: not YAML: %w", i+1, err)
		}
		object, err := newObject(head.APIVersion, head.Kind)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, head.Metadata.Name, err)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), object); err != nil {
			return nil, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
		}
		manifests = append(manifests, Manifest{Kind: head.Kind, Name: head.Metadata.Name, Object: object})
	}
	return manifests, nil
}

// split returns the non-empty YAML documents of a multi-document stream.
func split(rendered string) []string {
	var docs []string
	for _, doc := range strings.Split("\n"+rendered, "\n---") {
		content := false
		for _, line := range strings.Split(doc, "\n") {
			trimmed := strings.TrimSpace(line)
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				content = true
				break
			}
		}
		if content {
			docs = append(docs, doc)
		}
	}
	return docs
}

func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	case "keda.sh/v1alpha1/ScaledObject":
		return &ScaledObject{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &PrometheusRule{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q is not a kind this chart renders", apiVersion, kind)
}

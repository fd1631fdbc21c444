// Command chartcheck decodes every manifest that `helm template` rendered, strictly, into the
// Kubernetes API type its apiVersion and kind name (k8s.io/api), offline: an unknown field, a
// field of the wrong type or a kind this chart should not render fails, naming the document.
// Custom resources (KEDA's ScaledObject, the Prometheus operator's ServiceMonitor and
// PrometheusRule) are decoded into the parts of their schemas the chart uses (crds.go).
//
//	chartcheck RENDERED.yaml...
//
// With CHARTCHECK_CLUSTERS_OUT set to a folder, it also writes the cluster map each rendered
// chart carries there (RENDERED.clusters.json), for the platform's own parser to read. With
// CHARTCHECK_PLANS_OUT set to a folder, it writes each rendered chart's launch plan there
// (RENDERED.plan.json, plan.go): what testkit's chart-launch starts against a local stack.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
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
		if out := os.Getenv("CHARTCHECK_CLUSTERS_OUT"); out != "" {
			if err := writeClusterMap(docs, out, path); err != nil {
				fmt.Fprintf(os.Stderr, "chartcheck: %s: %v\n", path, err)
				failed++
			}
		}
		if out := os.Getenv("CHARTCHECK_PLANS_OUT"); out != "" {
			if err := writePlan(docs, out, path); err != nil {
				fmt.Fprintf(os.Stderr, "chartcheck: %s: launch plan: %v\n", path, err)
				failed++
			}
		}
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

// writeClusterMap writes the clusters.json of the rendered ConfigMap that holds one.
func writeClusterMap(docs []Manifest, out, rendered string) error {
	for _, doc := range docs {
		if cm, ok := doc.Object.(*corev1.ConfigMap); ok {
			if text, ok := cm.Data["clusters.json"]; ok {
				name := strings.TrimSuffix(filepath.Base(rendered), ".yaml") + ".clusters.json"
				return os.WriteFile(filepath.Join(out, name), []byte(text), 0o644)
			}
		}
	}
	return fmt.Errorf("no ConfigMap holds clusters.json")
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

// servedVersions are the built-in API versions the chart may use: those Kubernetes 1.27 and
// later serve (the scheme still knows removed ones, such as apps/v1beta1, for old objects).
var servedVersions = map[string]bool{
	"v1": true, "apps/v1": true, "policy/v1": true, "autoscaling/v2": true,
	"networking.k8s.io/v1": true, "rbac.authorization.k8s.io/v1": true, "batch/v1": true,
}

// newObject is an empty object of the API type apiVersion and kind name: a built-in kind from
// client-go's scheme (the types of k8s.io/api) in a served version, or one of the custom
// resources the chart renders.
func newObject(apiVersion, kind string) (any, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if custom, ok := customResources[gvk]; ok {
		return custom(), nil
	}
	if !servedVersions[apiVersion] {
		return nil, fmt.Errorf("apiVersion %q is not one Kubernetes 1.27 and later serve for the chart's kinds", apiVersion)
	}
	object, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q has no kind %q: %w", apiVersion, kind, err)
	}
	return object, nil
}

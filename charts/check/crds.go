package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The custom resources the chart renders, by group, version and kind, decoded into the parts of
// their schemas the chart uses (keda.sh/v1alpha1 and monitoring.coreos.com/v1). Strict decoding
// into these catches a misspelt field of the chart's own; a field they do not list here fails
// until it is added.
var customResources = map[schema.GroupVersionKind]func() any{
	{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}:           func() any { return &Resource[ScaledObjectSpec]{} },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}: func() any { return &Resource[ServiceMonitorSpec]{} },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}: func() any { return &Resource[PrometheusRuleSpec]{} },
}

// Resource is a custom resource: the standard type and object metadata, and its spec.
type Resource[Spec any] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              Spec `json:"spec"`
}

type ScaledObjectSpec struct {
	ScaleTargetRef struct {
		Name       string `json:"name"`
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	} `json:"scaleTargetRef"`
	MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
	Triggers        []struct {
		Type              string            `json:"type"`
		Metadata          map[string]string `json:"metadata"`
		AuthenticationRef *struct {
			Name string `json:"name"`
		} `json:"authenticationRef,omitempty"`
	} `json:"triggers"`
}

type ServiceMonitorSpec struct {
	Selector  metav1.LabelSelector `json:"selector"`
	Endpoints []struct {
		Port        string `json:"port"`
		Interval    string `json:"interval,omitempty"`
		HonorLabels bool   `json:"honorLabels,omitempty"`
	} `json:"endpoints"`
}

type PrometheusRuleSpec struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

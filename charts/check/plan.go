package main

// The launch plan of a rendered chart: what a kubelet would start for each Deployment, in the
// words a local runner needs (testkit's chart-launch starts these processes against a local
// stack). Only what the chart uses is carried; a construct the plan cannot express (an env
// var from a field reference, a projected volume, a subPath) fails here, naming it, so the
// chart cannot grow a wiring the launch check would silently skip.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Plan is everything one rendered chart would run.
type Plan struct {
	// ConfigMaps by name: each key a file when mounted.
	ConfigMaps map[string]map[string]string `json:"configMaps"`
	// Services by name: the Deployment they select and their ports (service port to the
	// container port it reaches).
	Services map[string]PlannedService `json:"services"`
	// One pod per Deployment (its replicas are copies of the same wiring), in manifest order.
	Pods []Pod `json:"pods"`
}

// PlannedService is a Service as the pods' addresses name it.
type PlannedService struct {
	Deployment string           `json:"deployment"`
	Ports      map[string]int32 `json:"ports"`
}

// Pod is one Deployment's only container, as it would start.
type Pod struct {
	Deployment string   `json:"deployment"`
	Command    []string `json:"command"`
	Args       []string `json:"args"`
	Env        []Env    `json:"env"`
	Mounts     []Mount  `json:"mounts"`
	// Container ports by name.
	Ports map[string]int32 `json:"ports"`
	// The readiness probe: a gRPC health check or a TCP connect on a port.
	Readiness Probe `json:"readiness"`
	// How long the kubelet waits after SIGTERM (and the preStop hook) before SIGKILL.
	GraceSeconds int64 `json:"graceSeconds"`
	// The preStop hook's sleep, if it has one: the kubelet runs it before SIGTERM.
	PreStopSleepSeconds int64 `json:"preStopSleepSeconds"`
}

// Env is a variable with a literal value or one read from a Secret or ConfigMap key.
type Env struct {
	Name      string  `json:"name"`
	Value     *string `json:"value,omitempty"`
	Secret    *KeyRef `json:"secret,omitempty"`
	ConfigMap *KeyRef `json:"configMap,omitempty"`
}

// KeyRef names one key of a Secret or ConfigMap.
type KeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Mount is a volume at a path: a ConfigMap's or Secret's keys as files, or an empty folder.
type Mount struct {
	Path      string `json:"path"`
	ConfigMap string `json:"configMap,omitempty"`
	Secret    string `json:"secret,omitempty"`
	EmptyDir  bool   `json:"emptyDir,omitempty"`
}

// Probe is a readiness probe the runner can make.
type Probe struct {
	GRPC int32 `json:"grpc,omitempty"`
	TCP  int32 `json:"tcp,omitempty"`
}

// writePlan writes the launch plan of one rendered chart to out/RENDERED.plan.json.
func writePlan(docs []Manifest, out, rendered string) error {
	plan, err := BuildPlan(docs)
	if err != nil {
		return err
	}
	text, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(rendered), ".yaml") + ".plan.json"
	return os.WriteFile(filepath.Join(out, name), text, 0o644)
}

// BuildPlan gathers the ConfigMaps, Services and Deployments of a rendered chart.
func BuildPlan(docs []Manifest) (*Plan, error) {
	// Empty, never nil: Go writes a nil slice or map as null, which the runner refuses.
	plan := &Plan{ConfigMaps: map[string]map[string]string{}, Services: map[string]PlannedService{}, Pods: []Pod{}}
	var deployments []*appsv1.Deployment
	for _, doc := range docs {
		switch object := doc.Object.(type) {
		case *corev1.ConfigMap:
			data := object.Data
			if data == nil {
				data = map[string]string{}
			}
			plan.ConfigMaps[object.Name] = data
		case *appsv1.StatefulSet, *appsv1.DaemonSet, *corev1.Pod, *batchv1.Job, *batchv1.CronJob:
			return nil, fmt.Errorf("%s %s: the launch check starts Deployments only; teach it this kind", doc.Kind, doc.Name)
		case *appsv1.Deployment:
			deployments = append(deployments, object)
			pod, err := planPod(object)
			if err != nil {
				return nil, fmt.Errorf("Deployment %s: %w", object.Name, err)
			}
			plan.Pods = append(plan.Pods, pod)
		}
	}
	for _, doc := range docs {
		if service, ok := doc.Object.(*corev1.Service); ok {
			planned, err := planService(service, deployments)
			if err != nil {
				return nil, fmt.Errorf("Service %s: %w", service.Name, err)
			}
			plan.Services[service.Name] = planned
		}
	}
	return plan, nil
}

func planPod(d *appsv1.Deployment) (Pod, error) {
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		return Pod{}, fmt.Errorf("%d containers and %d init containers; the launch check starts one container a pod",
			len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	if len(c.EnvFrom) != 0 {
		return Pod{}, fmt.Errorf("envFrom is not understood by the launch check; list the variables")
	}
	pod := Pod{
		Deployment: d.Name,
		Command:    c.Command,
		Args:       c.Args,
		Env:        []Env{},
		Mounts:     []Mount{},
		Ports:      map[string]int32{},
	}
	if pod.Args == nil {
		pod.Args = []string{}
	}
	if spec.TerminationGracePeriodSeconds != nil {
		pod.GraceSeconds = *spec.TerminationGracePeriodSeconds
	} else {
		pod.GraceSeconds = 30 // Kubernetes' default
	}
	if len(c.Command) == 0 {
		return Pod{}, fmt.Errorf("no command: the image's entrypoint would run, which the launch check does not know")
	}
	for _, port := range c.Ports {
		pod.Ports[port.Name] = port.ContainerPort
	}
	for _, e := range c.Env {
		env := Env{Name: e.Name}
		switch {
		case e.ValueFrom == nil:
			value := e.Value
			env.Value = &value
		case e.ValueFrom.SecretKeyRef != nil:
			env.Secret = &KeyRef{Name: e.ValueFrom.SecretKeyRef.Name, Key: e.ValueFrom.SecretKeyRef.Key}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			env.ConfigMap = &KeyRef{Name: e.ValueFrom.ConfigMapKeyRef.Name, Key: e.ValueFrom.ConfigMapKeyRef.Key}
		default:
			return Pod{}, fmt.Errorf("env %s: only values, secretKeyRef and configMapKeyRef are understood by the launch check", e.Name)
		}
		pod.Env = append(pod.Env, env)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			return Pod{}, fmt.Errorf("volume mount %s: subPath is not understood by the launch check", m.Name)
		}
		v, ok := volumes[m.Name]
		if !ok {
			return Pod{}, fmt.Errorf("volume mount %s names no volume of the pod", m.Name)
		}
		mount := Mount{Path: m.MountPath}
		switch {
		case v.ConfigMap != nil && len(v.ConfigMap.Items) == 0:
			mount.ConfigMap = v.ConfigMap.Name
		case v.Secret != nil && len(v.Secret.Items) == 0:
			mount.Secret = v.Secret.SecretName
		case v.EmptyDir != nil:
			mount.EmptyDir = true
		default:
			return Pod{}, fmt.Errorf("volume %s: only whole ConfigMaps, whole Secrets and emptyDirs are understood by the launch check", v.Name)
		}
		pod.Mounts = append(pod.Mounts, mount)
	}
	probe, err := planProbe(c.ReadinessProbe, pod.Ports)
	if err != nil {
		return Pod{}, err
	}
	pod.Readiness = probe
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		return Pod{}, fmt.Errorf("a postStart hook is not understood by the launch check")
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Exec == nil {
			return Pod{}, fmt.Errorf("preStop: only `exec: sleep N` is understood by the launch check")
		}
		command := c.Lifecycle.PreStop.Exec.Command
		if len(command) != 2 || command[0] != "sleep" {
			return Pod{}, fmt.Errorf("preStop %v: only `sleep N` is understood by the launch check", command)
		}
		if _, err := fmt.Sscanf(command[1], "%d", &pod.PreStopSleepSeconds); err != nil {
			return Pod{}, fmt.Errorf("preStop %v: %w", command, err)
		}
	}
	return pod, nil
}

func planProbe(p *corev1.Probe, ports map[string]int32) (Probe, error) {
	if p == nil {
		return Probe{}, fmt.Errorf("no readiness probe: the launch check would not know when the process serves")
	}
	switch {
	case p.GRPC != nil && (p.GRPC.Service == nil || *p.GRPC.Service == ""):
		return Probe{GRPC: p.GRPC.Port}, nil
	case p.TCPSocket != nil:
		port, err := portNumber(p.TCPSocket.Port, ports)
		return Probe{TCP: port}, err
	default:
		return Probe{}, fmt.Errorf("readiness probe: only gRPC (the whole server) and TCP probes are understood by the launch check")
	}
}

// planService maps a Service's ports to the container ports of the one Deployment it selects.
func planService(s *corev1.Service, deployments []*appsv1.Deployment) (PlannedService, error) {
	var selected []*appsv1.Deployment
	for _, d := range deployments {
		if selects(s.Spec.Selector, d.Spec.Template.Labels) {
			selected = append(selected, d)
		}
	}
	if len(selected) != 1 {
		names := make([]string, 0, len(selected))
		for _, d := range selected {
			names = append(names, d.Name)
		}
		sort.Strings(names)
		return PlannedService{}, fmt.Errorf("selects %d Deployments (%v); the launch check routes a Service to one", len(selected), names)
	}
	ports := map[string]int32{}
	for _, c := range selected[0].Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
	}
	planned := PlannedService{Deployment: selected[0].Name, Ports: map[string]int32{}}
	for _, p := range s.Spec.Ports {
		target, err := portNumber(p.TargetPort, ports)
		if err != nil {
			return PlannedService{}, fmt.Errorf("port %d: %w", p.Port, err)
		}
		if target == 0 {
			target = p.Port
		}
		planned.Ports[fmt.Sprint(p.Port)] = target
	}
	return planned, nil
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// portNumber resolves a port given by number or by the container port's name.
func portNumber(port intstr.IntOrString, named map[string]int32) (int32, error) {
	if port.Type == intstr.Int {
		return port.IntVal, nil
	}
	number, ok := named[port.StrVal]
	if !ok {
		return 0, fmt.Errorf("port %q is no container port's name", port.StrVal)
	}
	return number, nil
}

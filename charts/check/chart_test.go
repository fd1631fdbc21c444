package main

// The choices the chart makes, checked on what `helm template` renders: probes, checksums,
// one Deployment per consumer group, grace periods, security, and the schema's refusals.
// WAL_HELM names the helm binary (scripts/chart-check installs one); "helm" on PATH otherwise.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const chart = "../wal"

func helm() string {
	if path := os.Getenv("WAL_HELM"); path != "" {
		return path
	}
	return "helm"
}

// render runs helm template with `args` and returns its output, or its error text.
func render(t *testing.T, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"template", "t", chart, "--kube-version", "1.31.0"}, args...)
	out, err := exec.Command(helm(), all...).CombinedOutput()
	return string(out), err
}

func deployments(t *testing.T, args ...string) []*appsv1.Deployment {
	t.Helper()
	out, err := render(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	manifests, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	var found []*appsv1.Deployment
	for _, m := range manifests {
		if d, ok := m.Object.(*appsv1.Deployment); ok {
			found = append(found, d)
		}
	}
	return found
}

func valueSets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no value sets under %s/ci: %v", chart, err)
	}
	return files
}

func env(d *appsv1.Deployment, name string) (string, bool) {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func TestEveryValueSetRendersManifestsOfTheirAPITypes(t *testing.T) {
	for _, values := range valueSets(t) {
		out, err := render(t, "-f", values)
		if err != nil {
			t.Fatalf("%s: %v\n%s", values, err, out)
		}
		if _, err := Decode(out); err != nil {
			t.Errorf("%s: %v", values, err)
		}
	}
}

func TestEveryProcessHasGRPCProbesRunsAsNonRootAndReadsTheClusterMap(t *testing.T) {
	for _, values := range valueSets(t) {
		rendered := deployments(t, "-f", values)
		if len(rendered) == 0 {
			t.Fatalf("%s: no Deployment rendered to check", values)
		}
		for _, d := range rendered {
			c := d.Spec.Template.Spec.Containers[0]
			// The kubelet's gRPC probe cannot speak TLS: a TLS server is probed on its port.
			_, tls := env(d, "WAL_TLS_CERT")
			for probe, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				switch {
				case p == nil:
					t.Errorf("%s %s: no %s probe", values, d.Name, probe)
				case tls && p.TCPSocket == nil:
					t.Errorf("%s %s: serves TLS and has no TCP %s probe", values, d.Name, probe)
				case !tls && p.GRPC == nil:
					t.Errorf("%s %s: no gRPC %s probe", values, d.Name, probe)
				}
			}
			pod := d.Spec.Template.Spec.SecurityContext
			if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot {
				t.Errorf("%s %s: may run as root", values, d.Name)
			}
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s %s: root filesystem writable", values, d.Name)
			}
			if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil ||
				len(c.SecurityContext.Capabilities.Drop) != 1 || c.SecurityContext.Capabilities.Drop[0] != "ALL" ||
				c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("%s %s: keeps capabilities or may escalate", values, d.Name)
			}
			// The writer reads no cluster map: it applies what it is sent to its region's stores.
			if v, _ := env(d, "WAL_CLUSTERS"); v != "/etc/wal/clusters/clusters.json" && !isWriter(d) {
				t.Errorf("%s %s: WAL_CLUSTERS is %q", values, d.Name, v)
			}
		}
	}
}

func TestWithTLSTheServersMountTheSecretAndTheFollowersReachTheControlPlaneOverIt(t *testing.T) {
	values := filepath.Join(chart, "ci", "tls-values.yaml")
	servers := 0
	for _, d := range deployments(t, "-f", values) {
		component := d.Spec.Template.Labels["app.kubernetes.io/component"]
		mounted := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "tls" && v.Secret != nil && v.Secret.SecretName == "wal-tls" {
				mounted = true
			}
		}
		if component == "producer" || component == "control-plane" {
			servers++
			if cert, _ := env(d, "WAL_TLS_CERT"); cert != "/etc/wal/tls/tls.crt" || !mounted {
				t.Errorf("%s: WAL_TLS_CERT %q, Secret mounted: %v", d.Name, cert, mounted)
			}
			if ca, _ := env(d, "WAL_TLS_CLIENT_CA"); ca != "/etc/wal/tls/ca.crt" {
				t.Errorf("%s: client certificates not required (WAL_TLS_CLIENT_CA %q)", d.Name, ca)
			}
			if on, _ := env(d, "WAL_AUTHORIZE"); on != "true" {
				t.Errorf("%s: WAL_AUTHORIZE is %q", d.Name, on)
			}
			if users, _ := env(d, "WAL_SUPER_USERS"); users != "platform/walctl" {
				t.Errorf("%s: WAL_SUPER_USERS is %q", d.Name, users)
			}
		}
		if component == "producer" || component == "consumer" {
			url, _ := env(d, "WAL_CONTROL_PLANE")
			cert, _ := env(d, "WAL_CONTROL_PLANE_CERT")
			if !strings.HasPrefix(url, "https://") || cert != "/etc/wal/tls/tls.crt" || !mounted {
				t.Errorf("%s: follows %q with certificate %q (Secret mounted: %v)", d.Name, url, cert, mounted)
			}
		}
	}
	if servers != 2 {
		t.Errorf("expected a producer and a control plane, found %d TLS servers", servers)
	}
	// Authorization without TLS would run with none: refused, saying why.
	out, err := render(t, "--set", "tls.authorize=true")
	if err == nil || !strings.Contains(out, "tls.authorize needs tls.enabled") {
		t.Errorf("tls.authorize without tls rendered: %v\n%s", err, out)
	}
	// Without a Secret named, the chart says what is missing.
	out, err = render(t, "--set", "tls.enabled=true")
	if err == nil || !strings.Contains(out, "tls.secretName") {
		t.Errorf("tls on without a Secret rendered: %v\n%s", err, out)
	}
}

func TestClusterSecretsAreMountedWhereTheMapsFileValuesNameThem(t *testing.T) {
	values := filepath.Join(chart, "ci", "tls-values.yaml")
	for _, d := range deployments(t, "-f", values) {
		if isWriter(d) {
			continue
		}
		volume := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "kafka-login" {
				volume = true
			}
		}
		mounted := false
		for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name == "secret-kafka-login" && m.MountPath == "/etc/wal/secrets/kafka-login" && m.ReadOnly {
				mounted = true
			}
		}
		if !volume || !mounted {
			t.Errorf("%s: Secret kafka-login as a volume: %v, mounted read-only at /etc/wal/secrets/kafka-login: %v", d.Name, volume, mounted)
		}
	}
	// A name Kubernetes would refuse as a volume's is refused by the schema.
	out, err := render(t, "--set", "clusterSecrets={Kafka_Login}")
	if err == nil || !strings.Contains(out, "clusterSecrets") {
		t.Errorf("an invalid Secret name rendered: %v\n%s", err, out)
	}
}

func TestWithTLSTheWriterServesMTLSToItsReplicatorsAndConsumersCallItWithTheirCertificates(t *testing.T) {
	values := filepath.Join(chart, "ci", "tls-values.yaml")
	writers := 0
	for _, d := range deployments(t, "-f", values) {
		if isWriter(d) {
			writers++
			if cert, _ := env(d, "WAL_TLS_CERT"); cert != "/etc/wal/tls/tls.crt" {
				t.Errorf("%s: WAL_TLS_CERT is %q", d.Name, cert)
			}
			if users, _ := env(d, "WAL_SUPER_USERS"); users != "wal/wal-consumer" {
				t.Errorf("%s: lets in %q, not writer.replicators", d.Name, users)
			}
			continue
		}
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == "consumer" {
			if ca, _ := env(d, "WAL_WRITER_CA"); ca != "/etc/wal/tls/ca.crt" {
				t.Errorf("%s: WAL_WRITER_CA is %q", d.Name, ca)
			}
			if cert, _ := env(d, "WAL_WRITER_CERT"); cert != "/etc/wal/tls/tls.crt" {
				t.Errorf("%s: WAL_WRITER_CERT is %q", d.Name, cert)
			}
		}
	}
	if writers == 0 {
		t.Fatal("tls-values.yaml renders no writer")
	}
	// Authorization on a writer with nobody listed would refuse every region: refused, saying why.
	out, err := render(t, "-f", values, "--set-json", "writer.replicators=[]")
	if err == nil || !strings.Contains(out, "writer.replicators") {
		t.Errorf("a writer with authorization and no replicators rendered: %v\n%s", err, out)
	}
}

func isWriter(d *appsv1.Deployment) bool {
	return d.Spec.Template.Labels["app.kubernetes.io/component"] == "writer"
}

func TestReplicationRunsAWriterAndAConsumerDeploymentPerDestinationRegion(t *testing.T) {
	values := filepath.Join(chart, "ci", "replication-values.yaml")
	regions := map[string]string{}
	writers := 0
	for _, d := range deployments(t, "-f", values) {
		// The control plane too: its cancels and ListDestinations count the other regions as a
		// replicated namespace's destinations.
		region, _ := env(d, "WAL_REGION")
		if region != "eu-west-1" {
			t.Errorf("%s: WAL_REGION %q, want the release's region eu-west-1", d.Name, region)
		}
		if strings.Contains(d.Name, "control-plane") {
			continue // it keeps configs; it neither writes entries nor replicates them
		}
		if isWriter(d) {
			writers++
			checkWriter(t, d)
			continue
		}
		if strings.Contains(d.Name, "-consumer-") {
			to, _ := env(d, "WAL_REPLICATE_TO")
			regions[d.Name] = to
			reads, _ := env(d, "WAL_CONSUMER_DESTINATIONS")
			if want := map[string]string{
				"t-wal-consumer-main":   "default,events",
				"t-wal-consumer-caches": "cache",
			}[d.Name]; reads != want {
				t.Errorf("%s: WAL_CONSUMER_DESTINATIONS %q, want %q", d.Name, reads, want)
			}
			// The value set's groups name no replicas: each runs one, said, not left null.
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
				t.Errorf("%s: replicas %v, want 1 for a group that names none", d.Name, d.Spec.Replicas)
			}
		}
	}
	if writers != 1 {
		t.Errorf("%d writer Deployments, want 1", writers)
	}
	want := map[string]string{
		"t-wal-consumer-to-us-east-1": "us-east-1",
		"t-wal-consumer-to-us-west-2": "us-west-2",
		"t-wal-consumer-main":         "",
		"t-wal-consumer-caches":       "",
	}
	if len(regions) != len(want) {
		t.Fatalf("consumer Deployments %v, want %v", regions, want)
	}
	for name, to := range want {
		if regions[name] != to {
			t.Errorf("%s replicates to %q, want %q", name, regions[name], to)
		}
	}
}

// checkWriter holds the writer's Deployment to what wal-writer needs in a pod.
func checkWriter(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "wal-writer" {
		t.Errorf("%s: command %v", d.Name, c.Command)
	}
	for name, want := range map[string]string{
		"WAL_WRITER_LISTEN":           "0.0.0.0:50070",
		"WAL_WRITER_METRICS_LISTEN":   "0.0.0.0:9470",
		"WAL_MEMCACHED":               "evcache-foobar:11211",
		"WAL_WRITER_MAX_IN_FLIGHT":    "4096",
		"WAL_WRITER_APPLY_TIMEOUT_MS": "5000",
	} {
		if v, _ := env(d, name); v != want {
			t.Errorf("%s: %s %q, want %q", d.Name, name, v, want)
		}
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != 50070 {
			t.Errorf("%s: a probe not on the gRPC health service at 50070: %+v", d.Name, p)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		strings.Join(c.Lifecycle.PreStop.Exec.Command, " ") != "sleep 5" {
		t.Errorf("%s: no preStop pause of 5 s: %+v", d.Name, c.Lifecycle)
	}
	if pod := d.Spec.Template.Spec.SecurityContext; pod == nil || pod.RunAsUser == nil || *pod.RunAsUser != 10001 {
		t.Errorf("%s: not uid 10001, the image's user", d.Name)
	}
}

func TestTheWritersServiceCarriesGRPCOnlyAndItsMetricsAreScrapedInside(t *testing.T) {
	out, err := render(t, "-f", filepath.Join(chart, "ci", "replication-values.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	manifests, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]*corev1.Service{}
	var policy *networkingv1.NetworkPolicy
	for _, m := range manifests {
		switch o := m.Object.(type) {
		case *corev1.Service:
			services[o.Name] = o
		case *networkingv1.NetworkPolicy:
			if o.Name == "t-wal-writer" {
				policy = o
			}
		}
	}
	grpc := services["t-wal-writer"]
	if grpc == nil {
		t.Fatal("no writer Service")
	}
	if grpc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(grpc.Spec.Ports) != 1 ||
		grpc.Spec.Ports[0].Port != 50070 || grpc.Spec.Ports[0].TargetPort.String() != "grpc" {
		t.Errorf("writer Service: %s %+v, want a LoadBalancer of port 50070 to grpc alone", grpc.Spec.Type, grpc.Spec.Ports)
	}
	metrics := services["t-wal-writer-metrics"]
	if metrics == nil || metrics.Spec.Type != "" || len(metrics.Spec.Ports) != 1 ||
		metrics.Spec.Ports[0].Name != "metrics" || metrics.Spec.Ports[0].Port != 9470 ||
		metrics.Spec.Selector["app.kubernetes.io/component"] != "writer" {
		t.Errorf("writer metrics Service: %+v", metrics)
	}
	if policy == nil {
		t.Fatal("networkPolicy.enabled, and no NetworkPolicy for the writer")
	}
	ports := map[int32]int{}
	for _, rule := range policy.Spec.Ingress {
		for _, p := range rule.Ports {
			ports[p.Port.IntVal] = len(rule.From)
			if p.Port.IntVal == 50070 && (len(rule.From) != 1 || rule.From[0].IPBlock == nil || rule.From[0].IPBlock.CIDR != "10.0.0.0/8") {
				t.Errorf("writer gRPC ingress from %+v, want writer.allowedFrom", rule.From)
			}
		}
	}
	if _, ok := ports[50070]; !ok {
		t.Errorf("writer NetworkPolicy opens no gRPC port: %v", ports)
	}
	if _, ok := ports[9470]; !ok {
		t.Errorf("writer NetworkPolicy opens no metrics port: %v", ports)
	}
}

// The processes label series with the WAL namespace, a broker's service and a target's
// endpoint, names Prometheus gives target labels too: the ServiceMonitor keeps the processes'.
func TestTheServiceMonitorKeepsTheProcessesOwnLabels(t *testing.T) {
	out, err := render(t, "--set", "metrics.serviceMonitor.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	manifests, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	monitors := 0
	for _, m := range manifests {
		if sm, ok := m.Object.(*Resource[ServiceMonitorSpec]); ok {
			monitors++
			for _, e := range sm.Spec.Endpoints {
				if !e.HonorLabels {
					t.Errorf("ServiceMonitor %s, port %s: honorLabels off; the processes' namespace, service and endpoint labels would be renamed exported_*", sm.Name, e.Port)
				}
			}
		}
	}
	if monitors != 1 {
		t.Errorf("%d ServiceMonitors, want 1", monitors)
	}
}

func TestTheWriterIsOffUnlessEnabled(t *testing.T) {
	out, err := render(t, "--set", "networkPolicy.enabled=true", "--set", "metrics.serviceMonitor.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "wal-writer") || strings.Contains(out, "component: writer") {
		t.Error("the defaults render a writer")
	}
}

func TestAGroupReplicatingToTheReleasesOwnRegionIsRefused(t *testing.T) {
	values := filepath.Join(chart, "ci", "replication-values.yaml")
	// The platform compares region names without case, '-' or '_': us-east-1 is USEast1.
	for _, region := range []string{"us-east-1", "USEast1"} {
		out, err := render(t, "-f", values, "--set", "region="+region)
		if err == nil || !strings.Contains(out, "replicateTo names us-east-1, the release's own region") {
			t.Errorf("region %s: rendered, or said: %v %s", region, err, out)
		}
	}
}

func TestEachConsumerGroupIsADeploymentOfItsOwnServingItsStack(t *testing.T) {
	stacks := map[string]string{}
	for _, d := range deployments(t, "-f", filepath.Join(chart, "ci", "folder-values.yaml")) {
		if strings.Contains(d.Name, "-consumer-") {
			stack, _ := env(d, "WAL_CONSUMER_STACK")
			stacks[d.Name] = stack
		}
	}
	want := map[string]string{"t-wal-consumer-carts": "carts", "t-wal-consumer-invoices": "invoices"}
	if len(stacks) != len(want) {
		t.Fatalf("consumer Deployments %v, want %v", stacks, want)
	}
	for name, stack := range want {
		if stacks[name] != stack {
			t.Errorf("%s serves stack %q, want %q", name, stacks[name], stack)
		}
	}
}

func TestInFolderModeTheProcessesProvisionAndOtherwiseTheControlPlaneDoes(t *testing.T) {
	folder := filepath.Join(chart, "ci", "folder-values.yaml")
	for values, want := range map[string]string{folder: "true", "": ""} {
		args := []string{}
		if values != "" {
			args = []string{"-f", values}
		}
		checked := 0
		for _, d := range deployments(t, args...) {
			if strings.Contains(d.Name, "control-plane") {
				continue
			}
			checked++
			if got, _ := env(d, "WAL_PROVISION"); got != want {
				t.Errorf("%s %s: WAL_PROVISION %q, want %q", values, d.Name, got, want)
			}
		}
		if checked == 0 {
			t.Fatalf("%s: no Deployment besides the control plane's to check", values)
		}
	}
}

func TestAChangedClusterMapRollsEveryPod(t *testing.T) {
	before := deployments(t)
	after := deployments(t, "--set", "clusters.kafka.clusters.main.bootstrap_servers=kafka-new:9092")
	if len(before) != len(after) || len(before) == 0 {
		t.Fatalf("%d Deployments before, %d after", len(before), len(after))
	}
	for i := range before {
		was := before[i].Spec.Template.Annotations["checksum/clusters"]
		now := after[i].Spec.Template.Annotations["checksum/clusters"]
		if was == "" || was == now {
			t.Errorf("%s: checksum/clusters %q before, %q after", before[i].Name, was, now)
		}
	}
}

func TestAConsumerPodOutlastsItsShutdownGrace(t *testing.T) {
	consumers := 0
	for _, d := range deployments(t, "--set", "consumer.shutdownGraceMs=45000") {
		if !strings.Contains(d.Name, "-consumer-") {
			continue
		}
		consumers++
		// The preStop pause (5 s) and the shutdown grace, then up to 10 s for the final
		// commits (FINAL_COMMIT_WAIT, queue/src/kafka/mod.rs) and 10 s for leaving the
		// consumer groups (LEAVE_WAIT, consumer/src/service.rs), with some margin.
		grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
		if grace == nil || *grace <= 5+45+20 {
			t.Errorf("%s: terminationGracePeriodSeconds %v, not longer than the 5 s preStop pause, the 45 s shutdown grace and 20 s to commit and leave the groups", d.Name, grace)
		}
	}
	if consumers == 0 {
		t.Fatal("the chart rendered no consumer Deployment (named *-consumer-*) to check")
	}
}

func TestTheSchemaRefusesWrongValuesAtTemplateTime(t *testing.T) {
	cases := []struct{ set, says string }{
		{"producer.replicas=two", "got string, want integer"},
		{"producer.replica=2", "additional properties 'replica' not allowed"},
		{"feed.mode=files", "value must be one of"},
		{"consumer.groups[0].name=Not_A_Name", "does not match pattern"},
		{"consumer.groups[0].replicateTo[0]=us east 1", "does not match pattern"},
		{"writer.metricPort=9470", "additional properties 'metricPort' not allowed"},
		{"writer.allowedFrom[0].cidr=10.0.0.0/8", "additional properties 'cidr' not allowed"},
		{"writer.maxInFlight=0", "minimum"},
	}
	for _, c := range cases {
		out, err := render(t, "--set", c.set)
		if err == nil {
			t.Errorf("--set %s rendered", c.set)
			continue
		}
		if !strings.Contains(out, c.says) {
			t.Errorf("--set %s: %s", c.set, out)
		}
	}
}

func TestKEDAWithNothingToScaleOnIsRefused(t *testing.T) {
	out, err := render(t, "--set", "consumer.keda.enabled=true")
	if err == nil || !strings.Contains(out, "needs consumer.keda.kafka.topics or consumer.keda.sqs.queueURLs") {
		t.Errorf("rendered, or said: %v %s", err, out)
	}
}

func TestStrictDecodingCatchesWhatTheAPIServerWouldRefuse(t *testing.T) {
	typo := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n"
	if _, err := Decode(typo); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
	unknown := "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata:\n  name: x\n"
	if _, err := Decode(unknown); err == nil {
		t.Error("a removed API version decoded")
	}
}

// The launch plan (plan.go) carries each Deployment's wiring, and refuses wiring it cannot
// carry rather than leave it out of what chart-launch starts.
func TestTheLaunchPlanCarriesEveryDeploymentAndRefusesWhatItCannotCarry(t *testing.T) {
	out, err := render(t, "-f", filepath.Join(chart, "ci", "tls-values.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	docs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := BuildPlan(docs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range plan.Pods {
		names = append(names, pod.Deployment)
		// The consumer's health port serves plaintext; the others' gRPC ports serve TLS only.
		tcp := !strings.Contains(pod.Deployment, "consumer")
		if (pod.Readiness.TCP != 0) != tcp || (pod.Readiness.GRPC != 0) == tcp {
			t.Errorf("%s: readiness probe %+v; a TCP connect: %v", pod.Deployment, pod.Readiness, tcp)
		}
	}
	if got := strings.Join(names, " "); got != "t-wal-consumer-default t-wal-control-plane t-wal-producer t-wal-writer" {
		t.Errorf("pods %q", got)
	}
	if service := plan.Services["t-wal-control-plane"]; service.Deployment != "t-wal-control-plane" || service.Ports["50060"] != 50060 {
		t.Errorf("the control plane's Service: %+v", service)
	}
	for _, doc := range docs {
		if d, ok := doc.Object.(*appsv1.Deployment); ok {
			d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{}}
			break
		}
	}
	if _, err := BuildPlan(docs); err == nil || !strings.Contains(err.Error(), "envFrom") {
		t.Errorf("a Deployment with envFrom: %v; want a refusal naming envFrom", err)
	}
}

{{/* Names: <release>-wal-<component>, cut to 63 characters, as Kubernetes requires. */}}
{{- define "wal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wal.component" -}}
{{- printf "%s-%s" (include "wal.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The selector of one component: {root, component}. */}}
{{- define "wal.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* A region name as the platform compares them: case, '-' and '_' aside (eu-west-1 is euwest1). */}}
{{- define "wal.regionKey" -}}
{{- . | replace "-" "" | replace "_" "" | lower -}}
{{- end -}}

{{- define "wal.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "wal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The cluster map as the file every process reads. */}}
{{- define "wal.clusterMap" -}}
{{ toPrettyJson .Values.clusters }}
{{- end -}}

{{/* Pod annotations that roll the pods when what they read at start-up changes. */}}
{{- define "wal.checksums" -}}
checksum/clusters: {{ include "wal.clusterMap" . | sha256sum }}
{{- if eq .Values.feed.mode "folder" }}
checksum/namespaces: {{ toJson .Values.namespaces | sha256sum }}
{{- end }}
{{- end -}}

{{/* Environment every process shares: the cluster map, and where namespaces come from. */}}
{{- define "wal.commonEnv" -}}
- name: WAL_CLUSTERS
  value: /etc/wal/clusters/clusters.json
{{- end -}}

{{- define "wal.feedEnv" -}}
{{- if eq .Values.feed.mode "folder" }}
- name: WAL_NAMESPACES
  value: /etc/wal/namespaces
# No control plane provisions the namespaces' queues in folder mode: the processes do.
- name: WAL_PROVISION
  value: "true"
{{- else if .Values.tls.enabled }}
- name: WAL_CONTROL_PLANE
  value: https://{{ include "wal.component" (dict "root" . "component" "control-plane") }}:{{ .Values.controlPlane.service.port }}
- name: WAL_CONTROL_PLANE_CA
  value: /etc/wal/tls/ca.crt
- name: WAL_CONTROL_PLANE_CERT
  value: /etc/wal/tls/tls.crt
- name: WAL_CONTROL_PLANE_KEY
  value: /etc/wal/tls/tls.key
{{- else }}
- name: WAL_CONTROL_PLANE
  value: http://{{ include "wal.component" (dict "root" . "component" "control-plane") }}:{{ .Values.controlPlane.service.port }}
{{- end }}
{{- end -}}

{{/* A TLS server's settings (producer, control plane), from the tls values. */}}
{{- define "wal.tlsServerEnv" -}}
{{- if and .Values.tls.authorize (not .Values.tls.enabled) }}
{{- fail "tls.authorize needs tls.enabled: principals come from client certificates" }}
{{- end }}
{{- if .Values.tls.enabled }}
- name: WAL_TLS_CERT
  value: /etc/wal/tls/tls.crt
- name: WAL_TLS_KEY
  value: /etc/wal/tls/tls.key
- name: WAL_TLS_CLIENT_CA
  value: /etc/wal/tls/ca.crt
- name: WAL_PRINCIPAL_RULES
  value: {{ .Values.tls.principalRules | quote }}
- name: WAL_AUTHORIZE
  value: {{ .Values.tls.authorize | quote }}
{{- with .Values.tls.superUsers }}
- name: WAL_SUPER_USERS
  value: {{ join "," . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Probes of a gRPC port: the kubelet's gRPC probe speaks plaintext only, so with TLS on a
TCP probe stands in (the port answers). */}}
{{- define "wal.grpcProbes" -}}
{{- $port := .port }}
{{- if .root.Values.tls.enabled }}
readinessProbe:
  tcpSocket:
    port: {{ $port }}
  periodSeconds: {{ .readinessPeriod }}
livenessProbe:
  tcpSocket:
    port: {{ $port }}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 6
{{- else }}
readinessProbe:
  grpc:
    port: {{ $port }}
  periodSeconds: {{ .readinessPeriod }}
livenessProbe:
  grpc:
    port: {{ $port }}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 6
{{- end }}
{{- end -}}

{{- define "wal.volumeMounts" -}}
- name: clusters
  mountPath: /etc/wal/clusters
  readOnly: true
{{- if eq .Values.feed.mode "folder" }}
- name: namespaces
  mountPath: /etc/wal/namespaces
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- include "wal.tlsVolumeMount" . }}
{{- include "wal.clusterSecretMounts" . }}
{{- end -}}

{{/* The clusterSecrets, where the cluster map's ${file:...} values find them. */}}
{{- define "wal.clusterSecretMounts" -}}
{{- range .Values.clusterSecrets }}
- name: secret-{{ . }}
  mountPath: /etc/wal/secrets/{{ . }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "wal.clusterSecretVolumes" -}}
{{- range .Values.clusterSecrets }}
- name: secret-{{ . }}
  secret:
    secretName: {{ . }}
{{- end }}
{{- end -}}

{{- define "wal.tlsVolumeMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/wal/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "wal.tlsVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.secretName: name the Secret holding tls.crt, tls.key and ca.crt" .Values.tls.secretName }}
{{- end }}
{{- end -}}

{{- define "wal.volumes" -}}
- name: clusters
  configMap:
    name: {{ include "wal.component" (dict "root" . "component" "clusters") }}
{{- if eq .Values.feed.mode "folder" }}
- name: namespaces
  configMap:
    name: {{ include "wal.component" (dict "root" . "component" "namespaces") }}
{{- end }}
- name: tmp
  emptyDir: {}
{{- include "wal.tlsVolume" . }}
{{- include "wal.clusterSecretVolumes" . }}
{{- end -}}

{{- define "wal.podSpecCommon" -}}
serviceAccountName: {{ include "wal.serviceAccountName" . }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

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
{{- else }}
- name: WAL_CONTROL_PLANE
  value: http://{{ include "wal.component" (dict "root" . "component" "control-plane") }}:{{ .Values.controlPlane.service.port }}
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

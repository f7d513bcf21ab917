{{/* Names, labels and the operator command line. */}}

{{- define "vllm-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vllm-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vllm-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select the operator pod; they never change over the release's life. */}}
{{- define "vllm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "vllm-operator.labels" -}}
{{ include "vllm-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: vllm-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "vllm-operator.chart" . }}
{{- end -}}

{{- define "vllm-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vllm-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "vllm-operator.peeringName" -}}
{{- default (include "vllm-operator.fullname" .) .Values.ha.peeringName -}}
{{- end -}}

{{- define "vllm-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The namespaces the operator watches: none for Cluster scope. */}}
{{- define "vllm-operator.watchNamespaces" -}}
{{- if eq .Values.watch.scope "Namespaced" -}}
{{- if not .Values.watch.namespaces -}}
{{- fail "watch.namespaces must list at least one namespace when watch.scope is Namespaced" -}}
{{- end -}}
{{- toJson (uniq .Values.watch.namespaces) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/*
Scope arguments of `vllm-operator run` (both workloads): --all-namespaces, or -n per
namespace. kopf's liveness endpoint listens on every pod address so the kubelet can reach it.
*/}}
{{- define "vllm-operator.runArgs" -}}
{{- $namespaces := include "vllm-operator.watchNamespaces" . | fromJsonArray -}}
{{- if $namespaces }}
{{- range $namespaces }}
- --namespace={{ . }}
{{- end }}
{{- else }}
- --all-namespaces
{{- end }}
- --liveness=http://$(POD_IP):{{ .Values.health.port }}/healthz
{{- end -}}

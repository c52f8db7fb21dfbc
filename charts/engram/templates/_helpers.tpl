{{/* The name of everything the chart creates. */}}
{{- define "engram.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "engram.labels" -}}
app.kubernetes.io/name: engram
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "engram.selectorLabels" -}}
app.kubernetes.io/name: engram
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "engram.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "engram.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The monitoring namespaces as a label selector for the operator's
--service-metrics-namespaces ("k=v,k2=v2"); empty labels would admit every
namespace, so they are refused.
*/}}
{{- define "engram.metricsNamespaces" -}}
{{- if not .Values.monitoring.namespaceLabels -}}
{{- fail "monitoring.namespaceLabels must select the namespaces Prometheus runs in (empty would admit every namespace to the metrics ports)" -}}
{{- end -}}
{{- $sel := list -}}
{{- range $k, $v := .Values.monitoring.namespaceLabels -}}
{{- $sel = append $sel (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $sel -}}
{{- end -}}

{{- define "engram.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The default pod anti-affinity of the operator's pods: a preference for
nodes that run no other replica (affinity.podAntiAffinity replaces it). */}}
{{- define "engram.spreadOverNodes" -}}
preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "engram.selectorLabels" . | nindent 10 }}
{{- end -}}

{{/*
GOMEMLIMIT of the operator: 90% of its memory limit, so the Go runtime
collects harder before the kernel kills the container (without it the heap
may grow to twice the live set). A limit in Mi or Gi is computed here; any
other form takes the limit itself (resourceFieldRef, in bytes).
*/}}
{{- define "engram.goMemLimit" -}}
{{- $mem := toString (dig "limits" "memory" "" .Values.resources) -}}
{{- if regexMatch "^[0-9]+Mi$" $mem -}}
value: "{{ div (mul (trimSuffix "Mi" $mem | int) 9) 10 }}MiB"
{{- else if regexMatch "^[0-9]+Gi$" $mem -}}
value: "{{ div (mul (trimSuffix "Gi" $mem | int) 1024 9) 10 }}MiB"
{{- else -}}
valueFrom:
  resourceFieldRef:
    containerName: manager
    resource: limits.memory
{{- end -}}
{{- end -}}

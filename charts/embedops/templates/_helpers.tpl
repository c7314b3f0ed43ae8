{{/*
The labels config/default gives every object of a component: its own
(config/manager, config/rbac, ...) and app.kubernetes.io/part-of from
config/default. No Helm labels: test/chart compares the rendering with
config/default's, object for object.
*/}}
{{- define "embedops.labels" -}}
app.kubernetes.io/name: embedops
app.kubernetes.io/component: {{ . }}
app.kubernetes.io/part-of: embedops
{{- end }}

{{/*
The controller pods' labels: the Deployment's selector, the metrics
Service's selector, and --endpoint-check-pod-labels' default, which
servers' NetworkPolicies admit.
*/}}
{{- define "embedops.selectorLabels" -}}
app.kubernetes.io/name: embedops
app.kubernetes.io/component: controller
{{- end }}

{{/* The controller image, repository:tag. */}}
{{- define "embedops.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/*
The controller's arguments, in config/manager's order, then extraArgs,
which may not repeat a flag the values set (the last one would win).
*/}}
{{- define "embedops.args" -}}
{{- if .Values.populator.enabled }}
- --populator-image={{ .Values.populator.image | default (include "embedops.image" .) }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --enable-leader-election
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-addr=:{{ .Values.metrics.port }}
{{- else }}
- --metrics-addr=0
{{- end }}
- --health-addr=:{{ .Values.health.port }}
- --log-encoding={{ .Values.log.encoding }}
- --log-level={{ .Values.log.level }}
{{- $setByValues := dict "populator-image" "populator" "enable-leader-election" "leaderElection.enabled" "metrics-addr" "metrics" "health-addr" "health.port" "log-encoding" "log.encoding" "log-level" "log.level" }}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "^--([^=]*).*$" . "${1}" }}
{{- if hasKey $setByValues $flag }}
{{- fail (printf "extraArgs: --%s is set by the value %s: set that instead" $flag (get $setByValues $flag)) }}
{{- end }}
- {{ . | quote }}
{{- end }}
{{- end }}

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
{{ include "embedops.podLabels" "controller" }}
{{- end }}

{{/*
The pod labels of a controller component: "controller", or
"controller-<shard>" for a shard's Deployment, whose selector must not
overlap the main one's (Flux's sharding docs rename a shard's app label).
*/}}
{{- define "embedops.podLabels" -}}
app.kubernetes.io/name: embedops
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/*
The main controller's --watch-label-selector: watchLabelSelector, else,
when shards are listed, Flux's default-shard selector
!sharding.fluxcd.io/key, so the servers no shard claims are reconciled
once; empty otherwise.
*/}}
{{- define "embedops.watch" -}}
{{- if .Values.watchLabelSelector }}
{{- .Values.watchLabelSelector }}
{{- else if .Values.shards }}
{{- print "!sharding.fluxcd.io/key" }}
{{- end }}
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
{{- $component := .component }}
{{- $watch := .watch }}
{{- with .root }}
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
{{- with $watch }}
- --watch-label-selector={{ . }}
{{- end }}
{{- if ne $component "controller" }}
- --endpoint-check-pod-labels=app.kubernetes.io/name=embedops,app.kubernetes.io/component={{ $component }}
{{- end }}
{{- $setByValues := dict "populator-image" "populator" "enable-leader-election" "leaderElection.enabled" "metrics-addr" "metrics" "health-addr" "health.port" "log-encoding" "log.encoding" "log-level" "log.level" "watch-label-selector" "watchLabelSelector or shards" }}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "^--([^=]*).*$" . "${1}" }}
{{- if hasKey $setByValues $flag }}
{{- fail (printf "extraArgs: --%s is set by the value %s: set that instead" $flag (get $setByValues $flag)) }}
{{- end }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}

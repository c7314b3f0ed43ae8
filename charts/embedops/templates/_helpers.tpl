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

{{/*
embedops.crd is "render" when the CRD template of (list . <name> <schema
version>) renders its CRD, empty otherwise: with crds.enabled, when the
cluster has no such CRD or one whose embedops.dev/schema-version is not
newer than the chart's. A newer one leaves the release's manifest, and Helm
keeps it on the upgrade (helm v3.22 pkg/kube/client.go update: an object
the release had and no longer renders is deleted unless the live object is
annotated helm.sh/resource-policy: keep), so an upgrade to an older chart
does not downgrade it; a CRD without the annotation counts as version 1,
as internal/controller/schema reads it. A CRD another release owns stops
the install with what to do: Helm would refuse it, naming the owner but not
the way out (pkg/action/validate.go, existingResourceConflict). lookup
answers nothing under helm template, a client-side dry run and Argo CD's
rendering, so those render the CRD as before. helm rollback renders
nothing: it applies the manifest stored with the revision it goes back to
(pkg/action/rollback.go); crd-schema-policy.yaml guards that.
*/}}
{{- define "embedops.crd" -}}
{{- $root := index . 0 }}
{{- $name := index . 1 }}
{{- $version := index . 2 | int }}
{{- if dig "crds" "enabled" true $root.Values.AsMap }}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name }}
{{- if not $live }}
{{- print "render" }}
{{- else }}
{{- $annotations := dig "metadata" "annotations" dict $live }}
{{- $liveVersion := get $annotations "embedops.dev/schema-version" | default "1" | atoi }}
{{- if le $liveVersion $version }}
{{- $owner := get $annotations "meta.helm.sh/release-name" }}
{{- $ownerNamespace := get $annotations "meta.helm.sh/release-namespace" }}
{{- if and $owner (or (ne $owner $root.Release.Name) (ne $ownerNamespace $root.Release.Namespace)) }}
{{- fail (printf "CRD %s belongs to Helm release %s in namespace %s (an uninstalled release keeps its CRDs: helm.sh/resource-policy: keep). Install with --set crds.enabled=false to leave them to %s, or, if %s is uninstalled, hand them to this release and install again: kubectl annotate crd embeddingservers.embedops.dev modelcachebindings.embedops.dev --overwrite meta.helm.sh/release-name=%s meta.helm.sh/release-namespace=%s" $name $owner $ownerNamespace $owner $owner $root.Release.Name $root.Release.Namespace) }}
{{- end }}
{{- print "render" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

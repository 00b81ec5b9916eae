{{/*
metalgate.fullname: the prefix of every object's name. "metalgate" for a release named
metalgate (the names config/default uses: metalgate-controller, metalgate-speaker,
metalgate-proxy), else <release>-metalgate, or fullnameOverride; nameOverride replaces
"metalgate" in both rules. Cluster-scoped objects carry it too, so two releases with different
names never share a ClusterRole or binding.
*/}}
{{- define "metalgate.fullname" -}}
{{- $name := .Values.nameOverride | default "metalgate" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* metalgate.image: registry/repository, then @digest when set, else :tag (default: the
chart's appVersion). */}}
{{- define "metalgate.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; app.kubernetes.io/name and component are what kubectl metalgate
selects pods by, so nameOverride does not change them. commonLabels are added to each. */}}
{{- define "metalgate.labels" -}}
app.kubernetes.io/name: metalgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metalgate.podLabels: a pod template's labels, call with (dict "ctx" $ "component"
"proxy"): the selector's, then commonLabels and <component>.podLabels (which cannot replace
the selector's). */}}
{{- define "metalgate.podLabels" -}}
{{- $selector := include "metalgate.selectorLabels" . | fromYaml -}}
{{- $labels := merge (dict) $selector (get .ctx.Values .component).podLabels .ctx.Values.commonLabels -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* metalgate.serviceAccountName: a component's ServiceAccount, call with (dict "ctx" $
"component" "proxy" "values" .Values.proxy.serviceAccount): values.name, else
<fullname>-<component>. */}}
{{- define "metalgate.serviceAccountName" -}}
{{- .values.name | default (printf "%s-%s" (include "metalgate.fullname" .ctx) .component) -}}
{{- end -}}

{{/* metalgate.logLevelArg: --zap-log-level from <component>.logLevel, else logLevel; nothing
when both are empty (the binaries' default, info). Call with (dict "ctx" $ "level"
.Values.proxy.logLevel). */}}
{{- define "metalgate.logLevelArg" -}}
{{- $level := toString (.level | default .ctx.Values.logLevel | default "") -}}
{{- if $level -}}
- --zap-log-level={{ $level }}
{{- end -}}
{{- end -}}

{{/* metalgate.podDisruptionBudget: call with (dict "ctx" $ "component" "proxy" "values"
.Values.proxy.podDisruptionBudget): minAvailable when set, else maxUnavailable. */}}
{{- define "metalgate.podDisruptionBudget" -}}
{{- $v := .values }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "metalgate.fullname" .ctx }}-{{ .component }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "metalgate.labels" .ctx | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if not (kindIs "invalid" $v.minAvailable) }}
  minAvailable: {{ $v.minAvailable }}
  {{- else if not (kindIs "invalid" $v.maxUnavailable) }}
  maxUnavailable: {{ $v.maxUnavailable }}
  {{- else }}
  {{- fail (printf "%s.podDisruptionBudget: set minAvailable or maxUnavailable" .component) }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "metalgate.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
{{- end -}}

{{/* selectorLabels: call with (dict "ctx" $ "component" "proxy"). */}}
{{- define "metalgate.selectorLabels" -}}
app.kubernetes.io/name: metalgate
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* proxyNamespaces: the namespaces a namespace-scoped proxy reads (its watch namespaces and
its own, where its Service is), one per line. */}}
{{- define "metalgate.proxyNamespaces" -}}
{{- $seen := dict -}}
{{- range (append .Values.proxy.watchNamespaces .Release.Namespace) -}}
{{- if not (hasKey $seen .) -}}
{{- $_ := set $seen . true -}}
{{ . }}
{{ end -}}
{{- end -}}
{{- end -}}

{{/* metalgate.proxyServedRules: what the proxy reads and writes in each namespace it serves
(config/rbac/proxy/role.yaml, generated from its kubebuilder markers; config/chart_test.go checks
that its ServiceAccount gets exactly those rules, and where). */}}
{{- define "metalgate.proxyServedRules" -}}
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [get, update, patch]
- apiGroups: [""]
  resources: [services, secrets]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [referencegrants]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/* metalgate.proxyProtocolMode: a listener's PROXY protocol mode, off, optional or required;
YAML reads an unquoted off as false. Call with (dict "listener" "http" "mode" .Values...). */}}
{{- define "metalgate.proxyProtocolMode" -}}
{{- $m := toString .mode -}}
{{- if or (eq $m "false") (eq $m "") (eq $m "<nil>") -}}
off
{{- else if has $m (list "off" "optional" "required") -}}
{{ $m }}
{{- else -}}
{{- fail (printf "proxy.proxyProtocol.%s: %q: want off, optional or required" .listener $m) -}}
{{- end -}}
{{- end -}}

{{/* intOrPercentAboveZero: "true" when value (an integer or a percentage, e.g. 1 or "25%")
is above 0, else empty; a null value is default. Call with (dict "value" $v "default" 1). */}}
{{- define "metalgate.intOrPercentAboveZero" -}}
{{- $v := .value }}
{{- if kindIs "invalid" $v }}{{ $v = .default }}{{ end }}
{{- if gt (atoi (trimSuffix "%" (toString $v))) 0 }}true{{ end }}
{{- end -}}

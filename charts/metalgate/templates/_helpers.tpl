{{/*
metalgate.fullname: the prefix of every object's name. "metalgate" for a release named
metalgate (the names config/default uses: metalgate-controller, metalgate-speaker,
metalgate-proxy), else <release>-metalgate, or fullnameOverride. Cluster-scoped objects carry it
too, so two releases with different names never share a ClusterRole or binding.
*/}}
{{- define "metalgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "metalgate" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-metalgate" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "metalgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Labels of every object; app.kubernetes.io/name and component are what kubectl metalgate
selects pods by. */}}
{{- define "metalgate.labels" -}}
app.kubernetes.io/name: metalgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
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

{{/* The pod security context shared by the controller and the proxy: non-root, no privilege. */}}
{{- define "metalgate.restrictedPod" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "metalgate.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
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

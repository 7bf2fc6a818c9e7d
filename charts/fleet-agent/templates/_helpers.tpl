{{- define "fleet-agent.image" -}}
{{- with .Values.global.cattle.systemDefaultRegistry }}{{ . }}/{{ end }}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- define "fleet-agent.namespace" -}}
{{ .Values.systemNamespace | default .Release.Namespace }}
{{- end -}}

{{- /* The pods' imagePullSecrets: global.cattle.imagePullSecrets, as Rancher sets it, each entry
a Secret's name or {name: ...}. */}}
{{- define "fleet-agent.imagePullSecrets" -}}
{{- with ((.Values.global | default dict).cattle | default dict).imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

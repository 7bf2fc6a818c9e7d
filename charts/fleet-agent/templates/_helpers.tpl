{{- define "fleet-agent.image" -}}
{{- with .Values.global.cattle.systemDefaultRegistry }}{{ . }}/{{ end }}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- define "fleet-agent.namespace" -}}
{{ .Values.systemNamespace | default .Release.Namespace }}
{{- end -}}

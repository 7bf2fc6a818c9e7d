{{- /* An image reference: systemDefaultRegistry, repository, and the tag or the chart's appVersion. */ -}}
{{- define "fleet.imageRef" -}}
{{- $img := index . 0 -}}{{- $root := index . 1 -}}
{{- with $root.Values.global.cattle.systemDefaultRegistry }}{{ . }}/{{ end }}{{ $img.repository }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}

{{- define "fleet.image" -}}
{{ include "fleet.imageRef" (list .Values.image .) }}
{{- end -}}

{{- /* The largest of controller.reconciler.workers: one process runs every controller with one pool size. */ -}}
{{- define "fleet.workers" -}}
{{- $max := 1 -}}
{{- range $k, $v := .Values.controller.reconciler.workers }}{{ if gt (int $v) $max }}{{ $max = int $v }}{{ end }}{{ end -}}
{{ $max }}
{{- end -}}

{{- /* The pods' imagePullSecrets: global.cattle.imagePullSecrets, as Rancher sets it, each entry
a Secret's name or {name: ...}. */}}
{{- define "fleet.imagePullSecrets" -}}
{{- with ((.Values.global | default dict).cattle | default dict).imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

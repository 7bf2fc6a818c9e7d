{{- /*
fleet.knownKeys refuses a top-level values key that no release of Fleet's chart (nor this one)
has, naming the closest known key: the one sharing the longest prefix and suffix with it. The
known keys are the file known-keys: the schema's top-level properties (internal/chartrender tests that
they agree).
*/ -}}
{{- define "fleet.knownKeys" -}}
{{- $known := splitList "\n" (.Files.Get "known-keys" | trim) -}}
{{- range $key, $_ := .Values -}}
{{- if and $known (not (has $key $known)) -}}
{{- $best := "" -}}{{- $bestScore := -1 -}}
{{- range $k := $known -}}
{{- $n := min (len $key) (len $k) -}}
{{- $score := 0 -}}{{- $on := true -}}
{{- range $i := until (int $n) -}}
{{- if and $on (eq (substr $i (add1 $i | int) $key) (substr $i (add1 $i | int) $k)) -}}{{- $score = add1 $score -}}{{- else -}}{{- $on = false -}}{{- end -}}
{{- end -}}
{{- $on = true -}}
{{- range $i := until (int $n) -}}
{{- $a := sub (len $key) (add1 $i) | int -}}{{- $b := sub (len $k) (add1 $i) | int -}}
{{- if and $on (eq (substr $a (add1 $a | int) $key) (substr $b (add1 $b | int) $k)) -}}{{- $score = add1 $score -}}{{- else -}}{{- $on = false -}}{{- end -}}
{{- end -}}
{{- if gt $score $bestScore -}}{{- $best = $k -}}{{- $bestScore = $score -}}{{- end -}}
{{- end -}}
{{- fail (printf "values: %s is not a key of Fleet's %s chart (did you mean %s?)" $key $.Chart.Name $best) -}}
{{- end -}}
{{- end -}}
{{- end -}}

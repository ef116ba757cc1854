{{- define "ankusa.fullname" -}}
{{- printf "%s-ankusa-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ankusa.labels" -}}
app.kubernetes.io/name: ankusa-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /*
The `helm test` objects: never the operator pods' selector labels, or the ReplicaSet would adopt
the test pod, the metrics Service route to it, and the Gateways' NetworkPolicies admit it.
*/}}
{{- define "ankusa.testLabels" -}}
app.kubernetes.io/name: ankusa-selftest
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: helm-test
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ankusa.selectorLabels" -}}
app.kubernetes.io/name: ankusa-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ankusa.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ankusa.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ankusa.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

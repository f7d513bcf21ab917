{{/* The operator pod template, shared by the Deployment (default) and the StatefulSet (HA). */}}
{{- define "vllm-operator.podTemplate" -}}
metadata:
  labels:
    {{- include "vllm-operator.labels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # Rolls the pod when the operator config changes (the operator reads it once at start-up).
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "vllm-operator.serviceAccountName" . }}
  automountServiceAccountToken: true
  enableServiceLinks: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  # kopf stops its handlers and, in HA mode, removes itself from the peering on SIGTERM.
  terminationGracePeriodSeconds: 30
  containers:
    - name: operator
      image: {{ include "vllm-operator.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- if .Values.ha.enabled }}
      # kopf peering: every replica gets a distinct priority (basePriority - its ordinal, from
      # the pod name), so exactly one is active; a shell computes it, then execs the operator.
      command:
        - /bin/sh
        - -c
        - >-
          exec vllm-operator run
          --peering={{ include "vllm-operator.peeringName" . }}
          --priority=$(( {{ .Values.ha.basePriority }} - ${POD_ID##*-} )) "$@"
        - vllm-operator
      args:
        {{- include "vllm-operator.runArgs" . | trim | nindent 8 }}
      {{- else }}
      command: [vllm-operator, run]
      args:
        {{- include "vllm-operator.runArgs" . | trim | nindent 8 }}
      {{- end }}
      env:
        - name: VLLM_OPERATOR_CONFIG
          value: /etc/vllm-operator/config.yaml
        {{- with .Values.config.resyncSeconds }}
        # The resync timer's interval is read from the environment when the handlers register.
        - name: VLLM_OPERATOR_RESYNC_SECONDS
          value: {{ . | quote }}
        {{- end }}
        # kopf's identity in the peering object (and in its logs), and the holder of the Lease
        # that lets one replica run the resync and tuning loops in HA mode.
        - name: POD_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        # /metrics and /healthz bind the pod IP only (not 0.0.0.0): reachable through the pod
        # network, where the NetworkPolicy applies, and by the kubelet's probe.
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        # The operator's own /metrics (vllm_operator_*), on the port the Service targets.
        - name: VLLM_OPERATOR_METRICS_PORT
          value: {{ .Values.metrics.port | quote }}
        - name: VLLM_OPERATOR_METRICS_ADDRESS
          value: $(POD_IP)
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: health
          containerPort: {{ .Values.health.port }}
          protocol: TCP
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
      livenessProbe:
        httpGet:
          path: /healthz
          port: health
        {{- toYaml .Values.health.livenessProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/vllm-operator
          readOnly: true
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: config
      configMap:
        name: {{ include "vllm-operator.fullname" . }}
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

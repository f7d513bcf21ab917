{{/*
Rules for what the operator reads and writes in a watched namespace (k8s/client.py and kopf):
- VLLMServices: kopf lists/watches them and patches its annotations; status by server-side apply;
  finalizers/update lets children carry blockOwnerDeletion owner references where the
  OwnerReferencesPermissionEnforcement admission plugin is on.
- children by server-side apply (get to compare, create+patch to apply); never update. Garbage
  collection removes them with their VLLMService through their owner references; the optional
  ones (monitors, NetworkPolicy) are deleted when the spec switches them off.
- Deployments also list/watch: a kopf event handler follows the children's rollouts; delete for
  a canary Deployment once its budget change is promoted or removed (docs/rollouts.md §5).
- Pods: list/watch, the operator's own watch of its pods (handlers/pod_watch.py): what status
  reads of them, and a status pass when one becomes unschedulable or crash-loops (Degraded).
- Events: create (the operator's and kopf's own).
*/}}
{{- define "vllm-operator.namespacedRules" -}}
- apiGroups: [serving.vllmop.io]
  resources: [vllmservices]
  verbs: [get, list, watch, patch]
- apiGroups: [serving.vllmop.io]
  resources: [vllmservices/status]
  verbs: [get, patch]
- apiGroups: [serving.vllmop.io]
  resources: [vllmservices/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, patch]
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors, podmonitors]
  verbs: [get, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/*
Cluster-scoped needs: kopf's CRD list/watch (resource discovery); get on nodes, whose GPU labels
say which type pods with spec.gpu.fallbackTypes got (status.gpu.resolvedType); list on nodes and
pods when a rollout starts, to count the GPUs of the type free for surge pods
(docs/rollouts.md).
*/}}
{{- define "vllm-operator.clusterRules" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
{{- end -}}

"""vllm-operator: runs vLLM 0.33 servers on Kubernetes and keeps them inside their budgets."""

__version__ = "0.1.0.dev0"

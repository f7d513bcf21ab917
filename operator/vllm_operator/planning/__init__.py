"""The planner: vLLM budgets x replicas x GPU type for a workload and an SLO, in the engine model.

Pure (docs/planning.md): a workload description and the profiles in, evaluated points and a
recommendation out. `vllm-operator plan` (commands/plan.py) is its shell.
"""

# Thin aliases; `make help` lists them. The two README commands are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml twin/pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]' -e ./twin
	touch $@

.PHONY: install
install: $(VENV)/.installed install-system ## Python venv with the project and dev tools; system packages

# prometheus for the local cluster; buildah and mmdebstrap build the image where no docker daemon
# or podman runs and no registry serves the base (e2e/image.sh).
SYSTEM_PACKAGES := prometheus buildah mmdebstrap

.PHONY: install-system
install-system: ## Debian packages the cluster and the image build need (prometheus, buildah, mmdebstrap), when missing
	@missing=$$(for p in $(SYSTEM_PACKAGES); do command -v $$p >/dev/null || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; fi

.PHONY: toolchain
toolchain: ## Build or reuse kube-apiserver, kcm, scheduler, kubectl, etcd, kwok, helm (cached in ~/.cache)
	e2e/toolchain.sh

.PHONY: lint
lint: install ## ruff, ruff format --check, mypy --strict, import-linter, generated files (CRDs, docs, calibrated profile) up to date
	ruff check operator twin tests e2e bench conftest.py
	ruff format --check operator twin tests e2e bench conftest.py
	mypy
	lint-imports
	python -m vllm_operator.tools.gen_crds --check
	python -m vllm_operator.tools.gen_docs --check
	python -m vllm_twin.cli calibrate --check

.PHONY: crds
crds: install ## Regenerate crds/ (and the chart's copy) from the pydantic models
	python -m vllm_operator.tools.gen_crds

.PHONY: docs
docs: install ## Regenerate docs/crd-reference.md from the API models
	python -m vllm_operator.tools.gen_docs

.PHONY: chart-lint
chart-lint: install ## helm lint and goldens, rule checks (promtool), Dockerfile (hadolint)
	pytest tests/chart/test_chart_render.py tests/chart/test_prometheus_rules.py tests/chart/test_image.py tests/chart/test_docs.py

.PHONY: image
image: ## Build or reuse the operator image (docker, podman or buildah; cached by input hash)
	e2e/image.sh build

.PHONY: faults
faults: install ## Every fault scenario (tests/faults, the long ones too) on a fresh local cluster
	e2e/test.sh tests/faults

# The soak (tests/faults/test_soak.py) for SOAK_SECONDS of faults (30 minutes: about 10 hours of
# the tuner's time, compressed 20x) plus about 2 minutes of set-up, on a fresh cluster; not in CI.
SOAK_SECONDS ?= 1800
.PHONY: soak
soak: install ## Seeded random faults under load (SOAK_SECONDS, SOAK_SEED to replay): bench/results/soak.json
	VLLMOP_SOAK_SECONDS=$(SOAK_SECONDS) VLLMOP_SOAK_REPORT=bench/results/soak.json \
	  $(if $(SOAK_SEED),VLLMOP_SOAK_SEED=$(SOAK_SEED)) e2e/test.sh -s tests/faults/test_soak.py

.PHONY: bench-control
bench-control: install ## Control policies side by side in the twin: bench/results/control_loop.*
	python -m bench.control_loop

.PHONY: bench-fidelity
bench-fidelity: install ## The twin against measured vLLM (fit and held-out): bench/results/fidelity.*
	python bench/fidelity.py

.PHONY: bench-kernels
bench-kernels: install ## The twin's GPU step terms beside the kernels measured here: bench/results/kernel_parity_*
	python bench/kernel_parity.py

.PHONY: bench-plan
bench-plan: install ## The planner per example workload against vLLM's defaults: bench/results/planner.*
	python bench/planner.py

.PHONY: bench-operator
bench-operator: install ## Operator scale benchmark on the local cluster (figures in bench/results/)
	eval "$$(e2e/cluster.sh env)" && python bench/operator_scale.py

.PHONY: golden
golden: install ## Refresh the golden renderings of examples/ (review the diff!)
	UPDATE_GOLDEN=1 pytest tests/golden

.PHONY: unit
unit: install ## Pure tiers: unit, golden, component (no cluster)
	pytest tests/unit tests/golden tests/component

.PHONY: cluster-up
cluster-up: install toolchain ## Start the local control plane with kwok GPU nodes and Prometheus
	e2e/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane; fails if anything is left running
	e2e/cluster.sh down

.PHONY: test
test: install ## Every tier: lint, unit, golden, component, integration, e2e, faults but the long ones (cluster up and down)
	e2e/test.sh

.PHONY: demo
demo: install ## The embedded default: local control plane with simulated GPU nodes
	e2e/demo.sh

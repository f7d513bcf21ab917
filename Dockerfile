# syntax=docker/dockerfile:1
# vllm-operator image: a wheel built in one stage, installed into a virtualenv in a second, copied
# onto a slim runtime that runs as a non-root user and writes nothing outside /tmp (the chart sets
# readOnlyRootFilesystem and mounts an emptyDir there).
#
#   docker build -t vllm-operator:0.1.0 .
#
# The base is pinned to an exact tag; pin it by digest as well in your build pipeline
# (python:3.11.14-slim-bookworm@sha256:...) once you have pulled it: no registry is reachable
# from where this file is tested.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
# The project's wheel alone, then the wheel with its dependencies into the runtime's virtualenv.
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/vllm-operator \
    && /opt/vllm-operator/bin/pip install /wheels/vllm_operator-*.whl

FROM ${PYTHON_IMAGE} AS runtime
# A numeric, non-root user (runAsNonRoot can check it), with no login shell and no home on the
# read-only root: HOME is /tmp.
RUN groupadd --system --gid 65532 vllm-operator \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
       --shell /usr/sbin/nologin vllm-operator
COPY --from=build /opt/vllm-operator /opt/vllm-operator
ENV PATH=/opt/vllm-operator/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
# kopf's liveness endpoint (/healthz); the chart's livenessProbe targets it.
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["vllm-operator", "run"]
CMD ["--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz"]

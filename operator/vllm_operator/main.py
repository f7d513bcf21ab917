"""kopf wiring, and nothing else: registrations, start-up settings, probes.

Run with `vllm-operator run` (or `kopf run -m vllm_operator.main`). Handlers are synchronous,
because the kubernetes client is; kopf runs them in its thread pool.
"""

from __future__ import annotations

import logging
import os
import random
from typing import Any

import kopf

from vllm_operator import constants as c
from vllm_operator.handlers.deps import build_deps
from vllm_operator.handlers.reconcile import reconcile, reconcile_by_name

# Timer intervals are fixed at registration, before start-up runs: the one setting read here.
RESYNC_SECONDS = float(os.environ.get("VLLM_OPERATOR_RESYNC_SECONDS", "300"))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{c.GROUP}/finalizer"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    memo.deps = build_deps(os.environ)
    # Sync handlers block a thread each on API round-trips; 1,000 services need more than 5.
    settings.execution.max_workers = 32


@kopf.on.resume(c.GROUP, c.VERSION, c.PLURAL, id="vllmservice.reconcile")
@kopf.on.create(c.GROUP, c.VERSION, c.PLURAL, id="vllmservice.reconcile")
@kopf.on.update(c.GROUP, c.VERSION, c.PLURAL, field="spec", id="vllmservice.reconcile")
def on_vllmservice(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    reconcile(dict(body), deps=memo.deps, logger=logger)


@kopf.timer(
    c.GROUP,
    c.VERSION,
    c.PLURAL,
    interval=RESYNC_SECONDS,
    initial_delay=random.uniform(0, RESYNC_SECONDS),  # spread a thousand services over time
    id="vllmservice.resync",
)
def on_vllmservice_resync(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    reconcile(dict(body), deps=memo.deps, logger=logger)


@kopf.on.event("apps", "v1", "deployments", labels={c.LABEL_MANAGED_BY: c.MANAGED_BY})
def on_child_deployment(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """A child changed (rollout progress, someone edited it): status and drift follow at once."""
    parent = body.metadata.labels.get(c.LABEL_SERVICE)
    namespace = body.metadata.namespace
    if parent and namespace:
        reconcile_by_name(namespace, parent, deps=memo.deps, logger=logger)


@kopf.on.probe(id="reconciling")
def probe_alive(**_: Any) -> bool:
    return True

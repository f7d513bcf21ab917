"""The last render of each service, reused while its inputs stay the same.

Every pass renders (a status pass too: status.effective is what the render says the pods run),
and a service gets a few status passes for each spec pass while its pods start. Rendering was
the largest share of the operator's CPU while a fleet starts (docs/operator-scale.md: about a
third, most of it parsing the templates' YAML), and the operator shares the control plane's
cores in the scale benchmark. render_all reads the service's name, namespace, uid and spec, the
tuning overrides and the operator config, nothing else, so the same inputs give the same
result: the memo keys each service's last result by them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from vllm_operator.api.status import BudgetValues, EffectiveStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig
from vllm_operator.render.args import NO_OVERRIDES
from vllm_operator.render.core import RenderResult, render_all
from vllm_operator.render.templates import lossless_json


@dataclass(frozen=True)
class _Entry:
    inputs: tuple[str | None, str, str]  # uid, spec, overrides, as JSON
    cfg: OperatorConfig  # the same object, not an equal one (checked with `is`)
    manifests: str  # JSON: each caller gets its own dicts to change, and JSON is smaller
    effective: EffectiveStatus  # nobody changes it: status takes a dump of it
    warnings: tuple[str, ...]


class RenderMemo:
    """render_all with each service's last result kept (one per service, until `forget`).

    Not kept: results under an operator's own templateDir (its files may change under a running
    operator, and templates.py reads them again), manifests that JSON would change (none of the
    built-in templates' do: their values go through tojson), and failures (raised every time).
    """

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def render(
        self, svc: VLLMService, cfg: OperatorConfig, overrides: BudgetValues = NO_OVERRIDES
    ) -> RenderResult:
        if cfg.template_dir is not None:
            return render_all(svc, cfg, overrides)
        key = (svc.namespace or "", svc.name)
        inputs = (svc.uid, svc.spec.model_dump_json(), overrides.model_dump_json())
        with self._lock:
            entry = self._last.get(key)
        if entry is None or entry.inputs != inputs or entry.cfg is not cfg:
            result = render_all(svc, cfg, overrides)
            manifests = lossless_json(result.manifests)
            if manifests is not None:
                entry = _Entry(inputs, cfg, manifests, result.effective, tuple(result.warnings))
                with self._lock:
                    self._last[key] = entry
            return result
        fresh: list[dict[str, Any]] = json.loads(entry.manifests)
        return RenderResult(fresh, entry.effective, list(entry.warnings))

    def forget(self, namespace: str, name: str) -> None:
        """Drop a service's entry (it was deleted; a recreated one has another uid anyway)."""
        with self._lock:
            self._last.pop((namespace, name), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._last)

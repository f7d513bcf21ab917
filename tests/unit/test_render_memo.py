"""RenderMemo: the same result as render_all for any sequence of services and overrides, with
render_all run again only when a service's inputs changed."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vllm_operator.render.memo as memo_module
from tests.unit.render_support import CFG, svc
from vllm_operator.api.status import BudgetValues
from vllm_operator.config import OperatorConfig
from vllm_operator.render import RenderError, render_all
from vllm_operator.render.memo import RenderMemo

STORED = {"metadata": {"uid": "u-1", "resourceVersion": "7", "generation": 1}}


class Counting:
    """render_all, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return render_all(*args, **kw)


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Counting:
    counting = Counting()
    monkeypatch.setattr(memo_module, "render_all", counting)
    return counting


def _same(a: Any, b: Any) -> None:
    assert a.manifests == b.manifests
    assert a.effective_status() == b.effective_status()
    assert a.warnings == b.warnings


def test_a_status_pass_on_the_same_inputs_does_not_render_again(renders: Counting) -> None:
    memo, service = RenderMemo(), svc(STORED)
    first = memo.render(service, CFG)
    # a status write changes the resourceVersion and the status, not what is rendered
    later = svc({**STORED, "metadata": {**STORED["metadata"], "resourceVersion": "9"},
                 "status": {"observedGeneration": 1}})  # fmt: skip
    again = memo.render(later, CFG)
    assert renders.calls == 1
    _same(again, render_all(service, CFG))
    _same(first, again)


def test_render_all_reads_no_metadata_but_the_name_namespace_and_uid() -> None:
    """The memo's key holds only those of the metadata: were the renderer to read labels or
    annotations, a status pass would report a render of the old ones."""
    busy = {**STORED["metadata"], "labels": {"team": "a"}, "annotations": {"note": "b"},
            "generation": 7, "resourceVersion": "99", "creationTimestamp": "2026-12-05T14:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}]}  # fmt: skip
    _same(render_all(svc({**STORED, "metadata": busy}), CFG), render_all(svc(STORED), CFG))


def test_each_caller_gets_manifests_of_its_own(renders: Counting) -> None:
    memo, service = RenderMemo(), svc(STORED)
    first = memo.render(service, CFG)
    pristine = copy.deepcopy(first.manifests)
    first.manifests[0]["metadata"]["labels"]["changed"] = "by a caller"
    first.manifests[0]["spec"]["replicas"] = 99
    assert memo.render(service, CFG).manifests == pristine
    assert memo.render(service, CFG).manifests == pristine


@pytest.mark.parametrize(
    "change",
    [
        {"spec": {"replicas": 3}},
        {"spec": {"budgets": {"running": {"maxSeqs": 32}}}},
        {"metadata": {"uid": "u-2"}},  # deleted and created again under the same name
    ],
)
def test_a_changed_spec_or_uid_renders_again(renders: Counting, change: dict[str, Any]) -> None:
    memo = RenderMemo()
    memo.render(svc(STORED), CFG)
    changed = svc({**STORED, **change, "metadata": {**STORED["metadata"],
                                                   **change.get("metadata", {})}})  # fmt: skip
    _same(memo.render(changed, CFG), render_all(changed, CFG))
    assert renders.calls == 2


def test_changed_overrides_render_again(renders: Counting) -> None:
    memo, service = RenderMemo(), svc(STORED)
    memo.render(service, CFG)
    tuned = BudgetValues(max_seqs=32)
    _same(memo.render(service, CFG, tuned), render_all(service, CFG, tuned))
    memo.render(service, CFG, tuned)
    assert renders.calls == 2


def test_another_config_renders_again_even_when_equal(renders: Counting) -> None:
    memo, service = RenderMemo(), svc(STORED)
    memo.render(service, CFG)
    other = OperatorConfig.model_validate(CFG.model_dump())
    memo.render(service, other)
    memo.render(service, other)
    assert renders.calls == 2


def test_an_operators_own_templates_are_rendered_every_time(
    renders: Counting, tmp_path: Any
) -> None:
    memo, service = RenderMemo(), svc(STORED)
    cfg = CFG.model_copy(update={"template_dir": str(tmp_path)})  # no file: built-ins apply
    memo.render(service, cfg)
    memo.render(service, cfg)
    assert renders.calls == 2
    assert len(memo) == 0


def test_a_failure_is_raised_every_time_and_not_kept(renders: Counting) -> None:
    memo = RenderMemo()
    service = svc({**STORED, "spec": {"budgets": {"running": {"maxSeqs": 16}}}})
    refused = BudgetValues(max_active_seqs=32)  # more active than running: vLLM refuses it
    for _ in range(2):
        with pytest.raises(RenderError):
            memo.render(service, CFG, refused)
    assert renders.calls == 2
    assert len(memo) == 0


def test_forget_drops_the_service(renders: Counting) -> None:
    memo, service = RenderMemo(), svc(STORED)
    memo.render(service, CFG)
    memo.forget("llm", "chat")
    assert len(memo) == 0
    memo.render(service, CFG)
    assert renders.calls == 2


PATCHES = st.fixed_dictionaries(
    {},
    optional={
        "replicas": st.integers(1, 4),
        "budgets": st.fixed_dictionaries(
            {}, optional={"running": st.fixed_dictionaries({"maxSeqs": st.integers(8, 64)})}
        ),
        "servedModelName": st.sampled_from(["chat", "code"]),
    },
)
STEPS = st.tuples(
    st.sampled_from(["a", "b"]),
    st.sampled_from(["u-1", "u-2"]),
    PATCHES,
    st.one_of(st.none(), st.integers(16, 64)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(STEPS, min_size=1, max_size=8))
def test_the_memo_always_gives_what_render_all_gives(steps: list[Any]) -> None:
    memo = RenderMemo()
    for name, uid, patch, max_seqs in steps:
        service = svc({"metadata": {"name": name, "uid": uid}, "spec": patch})
        overrides = BudgetValues() if max_seqs is None else BudgetValues(max_seqs=max_seqs)
        _same(memo.render(service, CFG, overrides), render_all(service, CFG, overrides))


def test_manifests_that_json_would_change_are_not_kept(
    renders: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dated(*args: Any, **kw: Any) -> Any:
        result = render_all(*args, **kw)
        result.manifests[0]["metadata"]["annotations"] = {"since": datetime.date(2026, 12, 5)}
        return result

    monkeypatch.setattr(memo_module, "render_all", dated)
    memo, service = RenderMemo(), svc(STORED)
    assert memo.render(service, CFG).manifests[0]["metadata"]["annotations"]["since"].year == 2026
    assert len(memo) == 0

import pytest

from vllm_operator.render.drift import is_applied, stamp_applied_hash


@pytest.mark.parametrize(
    ("desired", "observed", "applied"),
    [
        ({"a": 1}, {"a": 1, "server": "default"}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 0}}, True),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
        ({"limits": {"gpu": "1"}}, {"limits": {"gpu": 1}}, True),  # quantities come back typed
        ({"x": True}, {"x": 1}, False),
        ({"x": 0.9}, {"x": 0.9}, True),
        ({"a": 1}, {}, False),
        (
            [{"name": "c", "args": ["m"]}],
            [{"name": "c", "args": ["m"], "imagePullPolicy": "IfNotPresent"}],
            True,
        ),
    ],
)
def test_is_applied(desired: object, observed: object, applied: bool) -> None:
    assert is_applied(desired, observed) is applied


def test_hash_sees_a_dropped_field() -> None:
    base = {"metadata": {"name": "x", "annotations": {"keep": "1"}}, "spec": {"a": 1, "b": 2}}
    dropped = {"metadata": {"name": "x", "annotations": {"keep": "1"}}, "spec": {"a": 1}}
    old = stamp_applied_hash(base, "h")
    new = stamp_applied_hash(dropped, "h")
    assert old["metadata"]["annotations"]["keep"] == "1"
    assert old["metadata"]["annotations"]["h"] != new["metadata"]["annotations"]["h"]
    # field-wise the new manifest looks applied; the annotation is what makes it differ
    assert not is_applied(new, old)
    assert base["metadata"]["annotations"] == {"keep": "1"}  # input untouched

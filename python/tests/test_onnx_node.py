"""The ONNX backend node tests shipped in the onnx package, run on pf (issue 3, item 5)."""

import pytest

from pipefisher import node_tests

SKIPS: dict[str, str] = {}

_TESTS = node_tests.discover()


@pytest.mark.parametrize("test", _TESTS, ids=[t.name for t in _TESTS])
def test_node(test, tmp_path):
    reason = node_tests.skip_reason(test, SKIPS)
    if reason is not None:
        pytest.skip(reason)
    node_tests.run_test(test, tmp_path)

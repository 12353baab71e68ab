"""The ONNX backend node tests shipped in the onnx package, run on pf (issue 3, item 5).

Every directory under ``onnx/backend/test/data/node`` is one pytest case: its
model goes through pf-run (import -> graph passes -> lowering to pfrt -> JIT ->
run) on ``test_data_set_0`` and every output is compared with the expected one
(rtol 1e-4, atol 1e-5 for floats; exact otherwise). Tests that use an op pf
does not import are skipped as "op X not supported"; the ones pf cannot run for
another known reason are listed in SKIPS below, and ``test_skipped_node_errors``
checks that pf-run rejects each of them with an error message, not a crash.
The harness (``pipefisher/node_tests.py``) imports models generated at opset
23/24 at opset 22 where their ops did not change, and turns inputs that pf needs
as constants (shapes, axes, slice bounds) into initializers; see
docs/onnx-node-tests.md, which ``python3 -m pipefisher.node_tests --markdown``
regenerates.
"""

import pytest

from pipefisher import node_tests

INT16 = "int16 has no runtime dtype (the lowering rejects i16)"
UNSIGNED = "unsigned integer types are not imported (the runtime has no unsigned dtypes)"
INT8_ARITH = "int8 arithmetic: pfrt add/sub/mul/div take f32, f64, i32 and i64"
INT_POW = "integer Pow: pfrt_pow takes f32 and f64"
MINMAX_DTYPE = "float16 Min/Max: pfrt_min and pfrt_max take f32, f64, i8, i32 and i64"
BF16 = "bfloat16 has no runtime dtype (the lowering rejects bf16)"
EXOTIC = "float8, float4, int4, uint4 and float8e8m0 element types are not imported"
STRING = "string tensors are not imported"
NON_TENSOR = "optional and sequence values: pf imports tensors only"
TRAINING_DROPOUT = ("training-mode Dropout with a ratio above 0 is random; pf imports "
                    "inference Dropout only and reports an error")

# Node tests of supported ops that pf cannot run, with the reason. pf-run must
# reject each with an error message (test_skipped_node_errors).
SKIPS: dict[str, str] = {
    "test_add_int16": INT16,
    "test_div_int16": INT16,
    "test_equal_int16": INT16,
    "test_mul_int16": INT16,
    "test_sub_int16": INT16,
    "test_add_int8": INT8_ARITH,
    "test_div_int8": INT8_ARITH,
    "test_mul_int8": INT8_ARITH,
    "test_sub_int8": INT8_ARITH,
    "test_add_uint16": UNSIGNED,
    "test_add_uint32": UNSIGNED,
    "test_add_uint64": UNSIGNED,
    "test_add_uint8": UNSIGNED,
    "test_div_uint16": UNSIGNED,
    "test_div_uint32": UNSIGNED,
    "test_div_uint64": UNSIGNED,
    "test_div_uint8": UNSIGNED,
    "test_equal_uint16": UNSIGNED,
    "test_equal_uint32": UNSIGNED,
    "test_equal_uint64": UNSIGNED,
    "test_equal_uint8": UNSIGNED,
    "test_mul_uint16": UNSIGNED,
    "test_mul_uint32": UNSIGNED,
    "test_mul_uint64": UNSIGNED,
    "test_mul_uint8": UNSIGNED,
    "test_pow_types_float32_uint32": UNSIGNED,
    "test_pow_types_float32_uint64": UNSIGNED,
    "test_sub_uint16": UNSIGNED,
    "test_sub_uint32": UNSIGNED,
    "test_sub_uint64": UNSIGNED,
    "test_sub_uint8": UNSIGNED,
    "test_greater_equal_int16": INT16,
    "test_greater_equal_int16_expanded": INT16,
    "test_greater_int16": INT16,
    "test_less_equal_int16": INT16,
    "test_less_equal_int16_expanded": INT16,
    "test_less_int16": INT16,
    "test_max_int16": INT16,
    "test_min_int16": INT16,
    "test_max_float16": MINMAX_DTYPE,
    "test_min_float16": MINMAX_DTYPE,
    "test_greater_equal_uint16": UNSIGNED,
    "test_greater_equal_uint16_expanded": UNSIGNED,
    "test_greater_equal_uint32": UNSIGNED,
    "test_greater_equal_uint32_expanded": UNSIGNED,
    "test_greater_equal_uint64": UNSIGNED,
    "test_greater_equal_uint64_expanded": UNSIGNED,
    "test_greater_equal_uint8": UNSIGNED,
    "test_greater_equal_uint8_expanded": UNSIGNED,
    "test_greater_uint16": UNSIGNED,
    "test_greater_uint32": UNSIGNED,
    "test_greater_uint64": UNSIGNED,
    "test_greater_uint8": UNSIGNED,
    "test_less_equal_uint16": UNSIGNED,
    "test_less_equal_uint16_expanded": UNSIGNED,
    "test_less_equal_uint32": UNSIGNED,
    "test_less_equal_uint32_expanded": UNSIGNED,
    "test_less_equal_uint64": UNSIGNED,
    "test_less_equal_uint64_expanded": UNSIGNED,
    "test_less_equal_uint8": UNSIGNED,
    "test_less_equal_uint8_expanded": UNSIGNED,
    "test_less_uint16": UNSIGNED,
    "test_less_uint32": UNSIGNED,
    "test_less_uint64": UNSIGNED,
    "test_less_uint8": UNSIGNED,
    "test_max_uint16": UNSIGNED,
    "test_max_uint32": UNSIGNED,
    "test_max_uint64": UNSIGNED,
    "test_max_uint8": UNSIGNED,
    "test_min_uint16": UNSIGNED,
    "test_min_uint32": UNSIGNED,
    "test_min_uint64": UNSIGNED,
    "test_min_uint8": UNSIGNED,
    "test_cast_BFLOAT16_to_FLOAT": BF16,
    "test_cast_FLOAT_to_BFLOAT16": BF16,
    # CastLike is Cast to its second input's type: the same dtypes are missing.
    "test_castlike_BFLOAT16_to_FLOAT": BF16,
    "test_castlike_FLOAT16_to_FLOAT4E2M1": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E4M3FN": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E5M2": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_castlike_FLOAT16_to_INT4": EXOTIC,
    "test_castlike_FLOAT16_to_UINT4": EXOTIC,
    "test_castlike_FLOAT4E2M1_to_FLOAT": EXOTIC,
    "test_castlike_FLOAT4E2M1_to_FLOAT16": EXOTIC,
    "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT": EXOTIC,
    "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16": EXOTIC,
    "test_castlike_FLOAT8E4M3FN_to_FLOAT": EXOTIC,
    "test_castlike_FLOAT8E4M3FN_to_FLOAT16": EXOTIC,
    "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT": EXOTIC,
    "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16": EXOTIC,
    "test_castlike_FLOAT8E5M2_to_FLOAT": EXOTIC,
    "test_castlike_FLOAT8E5M2_to_FLOAT16": EXOTIC,
    "test_castlike_FLOAT_to_BFLOAT16": BF16,
    "test_castlike_FLOAT_to_FLOAT4E2M1": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E4M3FN": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E5M2": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_castlike_FLOAT_to_INT4": EXOTIC,
    "test_castlike_FLOAT_to_UINT4": EXOTIC,
    "test_castlike_INT4_to_FLOAT": EXOTIC,
    "test_castlike_INT4_to_FLOAT16": EXOTIC,
    "test_castlike_INT4_to_INT8": EXOTIC,
    "test_castlike_UINT4_to_FLOAT": EXOTIC,
    "test_castlike_UINT4_to_FLOAT16": EXOTIC,
    "test_castlike_UINT4_to_UINT8": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_castlike_BFLOAT16_to_FLOAT_expanded": BF16,
    "test_castlike_FLOAT_to_BFLOAT16_expanded": BF16,
    "test_cast_FLOAT16_to_FLOAT4E2M1": EXOTIC,
    "test_cast_FLOAT16_to_FLOAT8E4M3FN": EXOTIC,
    "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_cast_FLOAT16_to_FLOAT8E5M2": EXOTIC,
    "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_cast_FLOAT16_to_INT4": EXOTIC,
    "test_cast_FLOAT16_to_UINT4": EXOTIC,
    "test_cast_FLOAT4E2M1_to_FLOAT": EXOTIC,
    "test_cast_FLOAT4E2M1_to_FLOAT16": EXOTIC,
    "test_cast_FLOAT8E4M3FNUZ_to_FLOAT": EXOTIC,
    "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16": EXOTIC,
    "test_cast_FLOAT8E4M3FN_to_FLOAT": EXOTIC,
    "test_cast_FLOAT8E4M3FN_to_FLOAT16": EXOTIC,
    "test_cast_FLOAT8E5M2FNUZ_to_FLOAT": EXOTIC,
    "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16": EXOTIC,
    "test_cast_FLOAT8E5M2_to_FLOAT": EXOTIC,
    "test_cast_FLOAT8E5M2_to_FLOAT16": EXOTIC,
    "test_cast_FLOAT_to_FLOAT4E2M1": EXOTIC,
    "test_cast_FLOAT_to_FLOAT8E4M3FN": EXOTIC,
    "test_cast_FLOAT_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_cast_FLOAT_to_FLOAT8E5M2": EXOTIC,
    "test_cast_FLOAT_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_cast_FLOAT_to_INT4": EXOTIC,
    "test_cast_FLOAT_to_UINT4": EXOTIC,
    "test_cast_INT4_to_FLOAT": EXOTIC,
    "test_cast_INT4_to_FLOAT16": EXOTIC,
    "test_cast_INT4_to_INT8": EXOTIC,
    "test_cast_UINT4_to_FLOAT": EXOTIC,
    "test_cast_UINT4_to_FLOAT16": EXOTIC,
    "test_cast_UINT4_to_UINT8": EXOTIC,
    "test_cast_e8m0_FLOAT8E8M0_to_FLOAT": EXOTIC,
    "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16": EXOTIC,
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN": EXOTIC,
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2": EXOTIC,
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN": EXOTIC,
    "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ": EXOTIC,
    "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2": EXOTIC,
    "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT4E2M1_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_FLOAT8E5M2_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_INT4_expanded": EXOTIC,
    "test_castlike_FLOAT16_to_UINT4_expanded": EXOTIC,
    "test_castlike_FLOAT4E2M1_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_FLOAT4E2M1_to_FLOAT_expanded": EXOTIC,
    "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded": EXOTIC,
    "test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded": EXOTIC,
    "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded": EXOTIC,
    "test_castlike_FLOAT8E5M2_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_FLOAT8E5M2_to_FLOAT_expanded": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT4E2M1_expanded": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded": EXOTIC,
    "test_castlike_FLOAT_to_FLOAT8E5M2_expanded": EXOTIC,
    "test_castlike_FLOAT_to_INT4_expanded": EXOTIC,
    "test_castlike_FLOAT_to_UINT4_expanded": EXOTIC,
    "test_castlike_INT4_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_INT4_to_FLOAT_expanded": EXOTIC,
    "test_castlike_INT4_to_INT8_expanded": EXOTIC,
    "test_castlike_UINT4_to_FLOAT16_expanded": EXOTIC,
    "test_castlike_UINT4_to_FLOAT_expanded": EXOTIC,
    "test_castlike_UINT4_to_UINT8_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded": EXOTIC,
    "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded": EXOTIC,
    "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0": EXOTIC,  # also opset 24 (sets round_mode)
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0": EXOTIC,
    "test_equal_string": STRING,
    "test_equal_string_broadcast": STRING,
    "test_identity_opt": NON_TENSOR,
    "test_identity_sequence": NON_TENSOR,
    "test_pow_types_int32_float32": INT_POW,
    "test_pow_types_int32_int32": INT_POW,
    "test_pow_types_int64_float32": INT_POW,
    "test_pow_types_int64_int64": INT_POW,
    "test_training_dropout": TRAINING_DROPOUT,
    "test_training_dropout_default": TRAINING_DROPOUT,
    "test_training_dropout_default_mask": TRAINING_DROPOUT,
    "test_training_dropout_mask": TRAINING_DROPOUT,
}

_TESTS = node_tests.discover()


@pytest.mark.parametrize("test", _TESTS, ids=[t.name for t in _TESTS])
def test_node(test, tmp_path):
    reason = node_tests.skip_reason(test, SKIPS)
    if reason is not None:
        pytest.skip(reason)
    node_tests.run_test(test, tmp_path)


_SKIPPED = [t for t in _TESTS if not t.unsupported and t.name in SKIPS]


@pytest.mark.parametrize("test", _SKIPPED, ids=[t.name for t in _SKIPPED])
def test_skipped_node_errors(test, tmp_path):
    """A skipped test of a supported op gives a clean pf-run error, never a crash."""
    node_tests.run_test(test, tmp_path, expect_error=True)


def test_skips_are_current():
    """Every SKIPS entry names a shipped node test whose ops pf supports."""
    by_name = {t.name: t for t in _TESTS}
    stale = [name for name in SKIPS if name not in by_name or by_name[name].unsupported]
    assert not stale, f"SKIPS entries to remove: {stale}"

"""Serving arithmetic against hand-computed cases: fits, 4-bit and fp8 caches, bytes per step."""

from __future__ import annotations

import dataclasses

import pytest
from attnbook.demos.calculators import AS_BUILT, memory_at
from attnlab.configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    SOPHIA,
    SOPHIA_NANO,
    MLAConfig,
    ModelConfig,
)
from attnlab.memory import cache_breakdown, cache_bytes_per_token, format_bytes
from attnlab.serving import (
    StepBytes,
    attention_prefill_flops,
    chunkwise_prefill_flops,
    crossover_batch,
    decode_step_bytes,
    expected_experts_touched,
    largest_batch,
    largest_context,
    memory_needed,
    sequence_bytes,
    step_seconds,
    weight_bytes,
    weights_read_per_step,
    what_if,
)

GIB = 2**30


def test_llama3_8b_kv_cache_in_4_bit():
    assert sequence_bytes(LLAMA3_8B, 131_072, cache_dtype="int4").cache_bytes == 4 * GIB
    three = sequence_bytes(LLAMA3_8B, 3, cache_dtype="fp4").total_bytes
    assert format_bytes(three) == "98.3 kB (96.0 KiB)"


def _tiny(pattern, **fields):
    """A small sized model: 1 head of 4, MLA caching 2 + 1 = 3 numbers a token."""
    mla = MLAConfig(n_heads=1, qk_nope_head_dim=4, qk_rope_head_dim=1, v_head_dim=4,
                    kv_lora_rank=2)
    return ModelConfig(name="tiny", vocab_size=10, d_model=8, layer_pattern=pattern, n_heads=1,
                       head_dim=4, mlp_hidden=8, mla=mla, **fields)


def test_a_4_bit_tensor_of_an_odd_count_rounds_up_per_layer():
    odd = _tiny(("mla", "mla"), params_total=1)
    assert sequence_bytes(odd, 1, cache_dtype="int4").cache_bytes == 2 * 2  # ⌈3 · 4 / 8⌉ a layer
    assert sequence_bytes(odd, 2, cache_dtype="int4").cache_bytes == 2 * 3


def test_a_batch_that_just_fits_and_one_more_that_does_not():
    # Llama-3-8B, bf16 weights 16.06 GB, 8192-token sequences of 1 GiB each
    weights = weight_bytes(LLAMA3_8B)
    assert weights == 2 * 8_030_000_000
    per_seq = sequence_bytes(LLAMA3_8B, 8192).total_bytes
    assert per_seq == GIB
    memory = weights + 10 * per_seq
    assert largest_batch(LLAMA3_8B, 8192, memory) == 10
    assert memory_needed(LLAMA3_8B, 8192, 10).total == memory
    assert memory_needed(LLAMA3_8B, 8192, 11).total > memory
    assert largest_batch(LLAMA3_8B, 8192, memory - 1) == 9
    assert largest_batch(LLAMA3_8B, 8192, weights - 1) == 0
    # an fp8 cache holds twice the sequences, 4-bit four times
    assert largest_batch(LLAMA3_8B, 8192, memory, cache_dtype="fp8") == 20
    assert largest_batch(LLAMA3_8B, 8192, memory, cache_dtype="int4") == 40


def test_largest_context_is_exact_at_the_boundary():
    weights = weight_bytes(LLAMA3_8B)
    memory = weights + 4 * 131_072 * 1000 + 5
    assert largest_context(LLAMA3_8B, 4, memory) == 1000
    assert largest_context(LLAMA3_8B, 4, memory - 6) == 999
    assert largest_context(LLAMA3_8B, 1, weights - 1) == 0
    stateful = _tiny(("kda",), params_total=5)
    assert largest_context(stateful, 1, 10**6) == -1  # nothing grows: no limit


def test_kimi_linear_fixed_state_fits_next_to_its_cache():
    need = memory_needed(KIMI_LINEAR_48B_A3B, 2**20, 2)
    assert need.cache == 2 * 8_064 * 2**20 and need.state == 2 * 40 * 2**20
    assert need.weights == 96_000_000_000
    assert need.total == need.weights + need.cache + need.state + need.conv


def test_moe_weights_read_grow_from_active_to_total_with_the_batch():
    assert weights_read_per_step(KIMI_LINEAR_48B_A3B, 1) == 2 * 3_000_000_000
    assert weights_read_per_step(KIMI_LINEAR_48B_A3B, 10**4) == pytest.approx(96e9, rel=1e-6)
    one, many = (weights_read_per_step(KIMI_LINEAR_48B_A3B, b) for b in (1, 64))
    assert one < many < weight_bytes(KIMI_LINEAR_48B_A3B)
    assert weights_read_per_step(LLAMA3_8B, 64) == weight_bytes(LLAMA3_8B)
    assert expected_experts_touched(256, 8, 1) == pytest.approx(8)
    assert expected_experts_touched(4, 2, 2) == pytest.approx(4 * (1 - 0.25))


def test_decode_step_reads_weights_once_and_caches_per_sequence():
    one = decode_step_bytes(LLAMA3_8B, 4096, 1)
    eight = decode_step_bytes(LLAMA3_8B, 4096, 8)
    assert eight.weights == one.weights == weight_bytes(LLAMA3_8B)
    assert eight.cache == 8 * one.cache == 8 * 4096 * 131_072
    assert one.bound == "weight-bound"
    assert decode_step_bytes(LLAMA3_8B, 2**20).bound == "cache-bound"
    # Llama-3-8B at 4096 tokens: 16.06 GB of weights against 0.537 GB of cache per sequence
    assert crossover_batch(LLAMA3_8B, 4096) == 30
    assert step_seconds(StepBytes(3, 1), bandwidth=2.0, overhead=0.5) == 2.5


@pytest.mark.parametrize(("call", "name"), [
    (lambda: sequence_bytes(LLAMA3_8B, -1), "context"),
    (lambda: memory_needed(LLAMA3_8B, 1, 0), "batch"),
    (lambda: largest_batch(LLAMA3_8B, 1, -5), "memory_bytes"),
    (lambda: sequence_bytes(LLAMA3_8B, 1, cache_dtype="int3"), "dtype"),
    (lambda: sequence_bytes("Llama", 1), "arch"),
    (lambda: weight_bytes(SOPHIA), "arch: Sophia has no parameter count"),
    (lambda: memory_needed(SOPHIA_NANO, 10), "arch: Sophia-nano has no parameter count"),
    (lambda: step_seconds(StepBytes(1, 1), bandwidth=0), "bandwidth"),
    (lambda: step_seconds(StepBytes(1, 1), bandwidth=1, overhead=-1), "overhead"),
    (lambda: expected_experts_touched(4, 8, 1), "experts_per_token"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_what_if_answers_fit_batch_context_and_step_together():
    weights = weight_bytes(LLAMA3_8B)
    answer = what_if(LLAMA3_8B, 8192, 10, weights + 10 * GIB)
    assert answer.need.total == weights + 10 * GIB
    assert (answer.max_batch, answer.max_context) == (10, 8192)
    assert answer.step == decode_step_bytes(LLAMA3_8B, 8192, 10)
    assert "fits" in str(answer) and "NOT" not in str(answer)
    assert "does NOT fit" in str(what_if(LLAMA3_8B, 8192, 11, weights + 10 * GIB))


def test_deepseek_v3_weights_are_counted_in_fp8_as_released():
    assert weight_bytes(DEEPSEEK_V3) == 671_000_000_000
    assert weight_bytes(DEEPSEEK_V3, "bf16") == 2 * 671_000_000_000


def test_prefill_flops_quadratic_for_attention_linear_for_chunkwise():
    assert attention_prefill_flops(4, 2, 3, 5) == 2 * (3 + 5) * 4 * 5
    assert chunkwise_prefill_flops(4, 2, 3, 5, chunk=2) == 2 * 2 * 4 * (2 * 8 + 2 * 15)
    ratio = attention_prefill_flops(2**20, 32, 192, 128) / attention_prefill_flops(
        2**19, 32, 192, 128)
    assert ratio == pytest.approx(4, rel=1e-5)
    assert chunkwise_prefill_flops(2**20, 32, 128, 128) == 2 * chunkwise_prefill_flops(
        2**19, 32, 128, 128)


def test_lesson_16b_exercise_seven_fp8_sequences_of_128k_on_80_gb():
    assert sequence_bytes(LLAMA3_8B, 131_072, cache_dtype="fp8").total_bytes == 8_589_934_592
    assert largest_batch(LLAMA3_8B, 131_072, 80 * 10**9, cache_dtype="fp8") == 7


@pytest.mark.parametrize("context", [0, 1, 4096, 2**20])
@pytest.mark.parametrize(("dtype", "state_dtype"), [("bf16", "bf16"), ("bf16", "fp32"),
                                                    ("fp8", "fp32"), ("int4", "bf16")])
def test_sophia_agrees_between_the_lesson_16_path_and_the_calculator(context, dtype, state_dtype):
    lesson = cache_breakdown(SOPHIA, context, dtype=dtype, state_dtype=state_dtype)
    calculator = sequence_bytes(SOPHIA, context, cache_dtype=dtype, state_dtype=state_dtype)
    assert calculator == lesson
    # and both are the arithmetic of Lesson 16, by hand: 7 MLA layers caching 384 + 48 numbers
    # a token, 21 KDA layers keeping 16 states of 96 x 96 and 3 rows of q, k, v inputs
    bits = {"bf16": 16, "fp32": 32, "fp8": 8, "int4": 4}
    assert lesson.cache_bytes == 7 * -(-(384 + 48) * context * bits[dtype] // 8)
    assert lesson.state_bytes == 21 * 16 * 96 * 96 * bits[state_dtype] // 8
    assert lesson.conv_bytes == 21 * 3 * 3 * 16 * 96 * bits[dtype] // 8
    assert cache_bytes_per_token(SOPHIA, dtype) == 7 * -(-(384 + 48) * bits[dtype] // 8)


def test_the_lesson_7_panel_counts_sophia_as_the_calculator_does():
    assert memory_at(AS_BUILT, 4096, "bf16") == sequence_bytes(
        SOPHIA, 4096, state_dtype="bf16").total_bytes


def test_a_model_with_twice_the_kv_heads_reads_twice_the_cache_bytes():
    llama_mha = dataclasses.replace(LLAMA3_8B, n_kv_heads=32)
    assert sequence_bytes(llama_mha, 4096).cache_bytes == 4 * sequence_bytes(
        LLAMA3_8B, 4096).cache_bytes
    assert weight_bytes(llama_mha) == weight_bytes(LLAMA3_8B)

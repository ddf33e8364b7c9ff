"""Serving arithmetic against hand-computed cases: fits, 4-bit and fp8 caches, bytes per step."""

from __future__ import annotations

import dataclasses

import pytest
from attnbook.demos.calculators import AS_BUILT, memory_at
from attnlab.configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    MINIMAX_TEXT_01,
    QWEN3_NEXT,
    SOPHIA,
    SOPHIA_NANO,
    MLAConfig,
    ModelConfig,
)
from attnlab.memory import cache_breakdown, cache_bytes_per_token, format_bytes
from attnlab.serving import (
    H100_SXM,
    H200,
    Deployment,
    StepBytes,
    attention_prefill_flops,
    capacity,
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
    # the untied embedding table (163,840 x 2,304) is gathered: B rows read, not the table
    table, row = 163_840 * 2304, 2304
    assert weights_read_per_step(KIMI_LINEAR_48B_A3B, 1) == 2 * (3_000_000_000 - table + row)
    assert weights_read_per_step(KIMI_LINEAR_48B_A3B, 10**4) == pytest.approx(
        2 * (48e9 - table + 10**4 * row), rel=1e-6)
    one, many = (weights_read_per_step(KIMI_LINEAR_48B_A3B, b) for b in (1, 64))
    assert one < many < weight_bytes(KIMI_LINEAR_48B_A3B)
    assert weights_read_per_step(LLAMA3_8B, 64) == weight_bytes(LLAMA3_8B) - 2 * (
        128_256 - 64) * 4096
    tied = dataclasses.replace(LLAMA3_8B, tie_embeddings=True)  # the LM head reads it whole
    assert weights_read_per_step(tied, 64) == weight_bytes(tied)
    assert expected_experts_touched(256, 8, 1) == pytest.approx(8)
    assert expected_experts_touched(4, 2, 2) == pytest.approx(4 * (1 - 0.25))


def test_decode_step_reads_weights_once_and_caches_per_sequence():
    one = decode_step_bytes(LLAMA3_8B, 4096, 1)
    eight = decode_step_bytes(LLAMA3_8B, 4096, 8)
    table = 2 * 128_256 * 4096  # bf16 embedding table, gathered row by row
    assert one.weights == weight_bytes(LLAMA3_8B) - table + 2 * 4096
    assert eight.weights == one.weights + 7 * 2 * 4096
    assert eight.cache == 8 * one.cache == 8 * 4096 * 131_072
    assert one.state == eight.state == 0
    assert one.bound == "weight-bound"
    assert decode_step_bytes(LLAMA3_8B, 2**20).bound == "cache-bound"
    # Llama-3-8B at 4096 tokens: 16.06 - 1.05 GB of weights read against 0.537 GB of cache
    # per sequence: (16.06e9 - 1.0506e9 + B · 8192) / 536,870,912 < B from B = 28
    assert crossover_batch(LLAMA3_8B, 4096) == 28
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
    # the embedding and LM head (2 x 129,280 x 7,168) stay in bf16, as in the fp8 release
    embedding = 2 * 129_280 * 7168
    assert weight_bytes(DEEPSEEK_V3) == 671_000_000_000 + embedding
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


# --- deployments: tensor parallelism, data-parallel attention, usable memory ------------------
DS_LATENT_128K = 61 * (512 + 64) * 131_072 * 2  # 61 MLA layers, latent + rope key, bf16
DS_WEIGHTS = 671_000_000_000 + 2 * 129_280 * 7168  # fp8, embedding and LM head in bf16


def test_deepseek_v3_at_128k_on_eight_h200_latent_replicated_or_data_parallel():
    tp = Deployment(H200, gpus=8, tp=8)
    dp = Deployment(H200, gpus=8, tp=8, dp_attention=True)
    for deployment in (tp, dp):  # the latent cannot be split by head: every GPU keeps it whole
        answer = capacity(DEEPSEEK_V3, 131_072, deployment)
        assert answer.sequence == DS_LATENT_128K == 9_210_691_584
        assert answer.weights == -(-DS_WEIGHTS // 8) == 84_106_669_760
        assert answer.usable == 126_900_000_000  # 0.9 x 141 GB
        assert answer.per_gpu == (126_900_000_000 - 84_106_669_760) // DS_LATENT_128K == 4
    assert capacity(DEEPSEEK_V3, 131_072, tp).per_node == 4  # one copy of the model
    assert capacity(DEEPSEEK_V3, 131_072, dp).per_node == 8 * 4  # each GPU its own
    # all of each GPU's memory: 6 sequences under TP, 48 with DP attention; pooling the node's
    # memory as one device gives 49, which no real placement reaches
    whole = {"memory_fraction": 1.0, "block_tokens": 1}
    assert capacity(DEEPSEEK_V3, 131_072, Deployment(H200, 8, 8, **whole)).per_node == 6
    assert capacity(DEEPSEEK_V3, 131_072, Deployment(
        H200, 8, 8, dp_attention=True, **whole)).per_node == 48
    assert largest_batch(DEEPSEEK_V3, 131_072, 8 * 141 * 10**9) == 49


def test_kv_heads_are_replicated_when_fewer_than_the_tp_degree():
    # Llama-3-8B has 8 KV heads of 128 in 32 layers: at tp = 4 two heads a GPU, at tp = 16 one
    for tp, heads in ((1, 8), (4, 2), (8, 1), (16, 1)):
        assert sequence_bytes(LLAMA3_8B, 1000, tp=tp).cache_bytes == (
            32 * 2 * heads * 128 * 1000 * 2)
    # Qwen3-Next: 2 KV heads (12 attention layers) and 32 value heads of Gated DeltaNet
    # (36 layers, 128 x 128 states in bf16): at tp = 8 each GPU keeps 1 KV head, 4 states
    seq = sequence_bytes(QWEN3_NEXT, 1000, tp=8)
    assert seq.cache_bytes == 12 * 2 * 1 * 256 * 1000 * 2
    assert seq.state_bytes == 36 * 4 * 128 * 128 * 2


def test_usable_memory_fraction_and_activation_reserve():
    # Llama-3-8B, 8,192-token sequences of exactly 1 GiB, on one H100 SXM (80 GB)
    weights = 2 * 8_030_000_000
    full = Deployment(H100_SXM, memory_fraction=1.0)
    assert capacity(LLAMA3_8B, 8192, full).per_gpu == (80 * 10**9 - weights) // GIB == 59
    engine = Deployment(H100_SXM)  # vLLM's default gpu_memory_utilization = 0.9
    assert capacity(LLAMA3_8B, 8192, engine).per_gpu == (72 * 10**9 - weights) // GIB == 52
    reserve = Deployment(H100_SXM, activation_reserve=2 * 10**9)
    assert capacity(LLAMA3_8B, 8192, reserve).per_gpu == (70 * 10**9 - weights) // GIB == 50


def test_the_cache_is_handed_out_in_whole_blocks():
    # 8,193 tokens take 513 blocks of 16: 8,208 tokens of cache
    assert sequence_bytes(LLAMA3_8B, 8193, block_tokens=16).cache_bytes == 8208 * 131_072
    assert sequence_bytes(LLAMA3_8B, 8193).cache_bytes == 8193 * 131_072


def test_engine_default_state_dtypes_kda_fp32_the_others_the_model_dtype():
    minimax = sequence_bytes(MINIMAX_TEXT_01, 0)  # 70 lightning layers, 64 heads of 128 x 128
    assert minimax.state_bytes == 70 * 64 * 128 * 128 * 2
    assert sequence_bytes(MINIMAX_TEXT_01, 0, state_dtype="fp32").state_bytes == (
        2 * minimax.state_bytes)
    kimi = sequence_bytes(KIMI_LINEAR_48B_A3B, 0)
    assert kimi.state_bytes == 20 * 32 * 128 * 128 * 4  # KDA in fp32


def test_4_bit_weights_carry_their_scales_and_keep_the_embeddings_wide():
    embedding = 2 * 128_256 * 4096  # untied: input table and LM head, kept in bf16
    quantised = 8_030_000_000 - embedding
    awq = weight_bytes(LLAMA3_8B, "int4", group=128, scale_bits=20)
    scales = -(-quantised // 128)  # one 20-bit scale and zero point per group of 128
    assert awq == quantised // 2 + 2 * embedding + -(-scales * 20 // 8)
    assert awq > weight_bytes(LLAMA3_8B, "int4") > 8_030_000_000 // 2


def test_a_step_reads_and_writes_the_recurrent_state():
    step = decode_step_bytes(KIMI_LINEAR_48B_A3B, 1000, 3)
    seq = sequence_bytes(KIMI_LINEAR_48B_A3B, 1000)
    assert step.state == 3 * 2 * seq.state_bytes
    assert step.cache == 3 * (seq.cache_bytes + seq.conv_bytes)


def test_a_step_per_gpu_under_tp_reads_its_share_of_the_weights():
    deployment = Deployment(H200, gpus=8, tp=8, block_tokens=1)
    one_gpu = decode_step_bytes(LLAMA3_8B, 4096, 5, deployment=deployment)
    whole = decode_step_bytes(LLAMA3_8B, 4096, 5)
    assert one_gpu.weights == -(-whole.weights // 8)
    assert one_gpu.cache == 5 * 32 * 2 * 1 * 128 * 4096 * 2  # one KV head a GPU


def _one_by_one(arch, context, max_batch, deployment=None):
    for batch in range(1, max_batch + 1):
        step = decode_step_bytes(arch, context, batch, deployment=deployment)
        if step.bound == "cache-bound":
            return batch
    return None


@pytest.mark.parametrize("arch", [LLAMA3_8B, KIMI_LINEAR_48B_A3B, QWEN3_NEXT, DEEPSEEK_V3])
@pytest.mark.parametrize("context", [16, 4096, 131_072])
@pytest.mark.parametrize("deployment", [None, Deployment(H200, 8, 8),
                                        Deployment(H200, 8, 8, dp_attention=True)])
def test_crossover_by_bisection_equals_the_one_by_one_search(arch, context, deployment):
    for max_batch in (1, 7, 64):
        assert crossover_batch(arch, context, max_batch=max_batch, deployment=deployment) == (
            _one_by_one(arch, context, max_batch, deployment))


@pytest.mark.parametrize(("make", "name"), [
    (lambda: Deployment(H200, gpus=8, tp=3), "Deployment.tp"),
    (lambda: Deployment(H200, gpus=0), "Deployment.gpus"),
    (lambda: Deployment(H200, memory_fraction=1.5), "Deployment.memory_fraction"),
    (lambda: Deployment(H200, activation_reserve=-1), "Deployment.activation_reserve"),
    (lambda: Deployment(H200, block_tokens=0), "Deployment.block_tokens"),
    (lambda: Deployment(H200, dp_attention="yes"), "Deployment.dp_attention"),
    (lambda: Deployment(H200, cache_dtype="fp7"), "Deployment.cache_dtype"),
    (lambda: Deployment(H200, state_dtype="fp7"), "Deployment.state_dtype"),
    (lambda: Deployment("H200"), "Deployment.hardware"),
    (lambda: capacity(LLAMA3_8B, 4096, "8 x H200"), "deployment"),
    (lambda: sequence_bytes(LLAMA3_8B, 4096, tp=0), "tp"),
])
def test_a_bad_deployment_names_the_argument(make, name):
    with pytest.raises(ValueError, match=name):
        make()

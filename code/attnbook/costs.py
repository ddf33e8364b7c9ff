"""What each form costs: the arithmetic of linear attention's three forms (Lesson 8) and of the
delta rule's two (Lesson 13), counted in floating-point operations and in steps that must run one
after another. Counts, not timings: :mod:`attnbook.timing` measures the same forms on this
machine, and the lessons set the two side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.checks import check_choice, check_positive_int

# --------------------------------------------------------------------------- linear attention
LINEAR_FORMS = ("parallel", "recurrent", "chunk")
"""The three ways to compute causal linear attention, named as in ``linear_attention_<form>``."""


@dataclass(frozen=True)
class FormCost:
    """The work of one form of linear attention for one head and one sequence.

    - ``flops``: 2 × the multiply-adds of its matrix products (the feature map, the scale, the
      mask and the sums of partial outputs are not counted).
    - ``score_numbers``: entries of the score matrices ``Q Kᵀ ⊙ M`` it holds at once.
    - ``sequential_steps``: steps that must run one after another (its loop over time or chunks).
    """

    flops: int
    score_numbers: int
    sequential_steps: int


def linear_attention_cost(
    form: str, length: int, head_dim: int, chunk_size: int = 64
) -> FormCost:
    """FLOPs, score-matrix size and sequential steps of ``form`` for one head, as the kernels of
    ``attnlab.linear`` compute it, with T = ``length``, d = ``head_dim`` = Dk = Dv,
    C = ``chunk_size`` and S_0 = 0:

    ==========  ===============================================  ===========  ================
    form        FLOPs                                            scores held  sequential steps
    ==========  ===============================================  ===========  ================
    parallel    4 T² d         (Q Kᵀ, then the T × T scores · V)  T²           1
    recurrent   4 T d²         (k_t v_tᵀ, then S_tᵀ q_t)          0            T
    chunk       4 N C (C d + d²)   N = ⌈T / C⌉ chunks             N C²         N
    ==========  ===============================================  ===========  ================

    Chunkwise, each chunk multiplies Q Kᵀ and the scores by V inside the chunk (2 C² d
    multiply-adds) and Q by the state and Kᵀ by V (2 C d²); the last chunk is padded to C
    tokens, as ``linear_attention_chunk`` does. So ``chunk_size=1`` costs the recurrent work plus
    4 T d, and ``chunk_size=T`` the parallel work plus 4 T d². The parallel kernel multiplies
    the full T × T matrix (a kernel that skipped the masked upper half would do about half); it
    also computes Q S_0 and the final state's Kᵀ V, 4 T d² more, which are not counted here.
    """
    check_choice("form", form, LINEAR_FORMS)
    t = check_positive_int("length", length)
    d = check_positive_int("head_dim", head_dim)
    c = check_positive_int("chunk_size", chunk_size)
    if form == "parallel":
        return FormCost(
            flops=4 * t * t * d, score_numbers=t * t, sequential_steps=1
        )
    if form == "recurrent":
        return FormCost(
            flops=4 * t * d * d, score_numbers=0, sequential_steps=t
        )
    n = -(-t // c)
    return FormCost(
        flops=4 * n * c * (c * d + d * d),
        score_numbers=n * c * c,
        sequential_steps=n,
    )


# --------------------------------------------------------------------------- the delta rule
DELTA_FORMS = ("recurrent", "chunk")
"""The forms :func:`delta_rule_cost` and :func:`attnbook.timing.time_delta_rule` know."""


@dataclass(frozen=True)
class DeltaRuleCost:
    """Work of one head of the delta rule: FLOPs with the C × C matrices inside chunks
    (``intra_flops``), FLOPs with the d × d state (``inter_flops``), and how many steps must run
    one after another (``sequential_steps``)."""

    intra_flops: int
    inter_flops: int
    sequential_steps: int

    @property
    def flops(self) -> int:
        """intra + inter FLOPs."""
        return self.intra_flops + self.inter_flops


def delta_rule_cost(
    form: str, length: int, head_dim: int, chunk_size: int = 64
) -> DeltaRuleCost:
    """FLOPs (2 per multiply-add) and sequential steps of the delta rule for one head, counted
    as ``delta_rule_recurrent`` and ``delta_rule_chunk_reference`` compute it, with
    T = ``length``, d = ``head_dim`` = Dk = Dv, C = ``chunk_size``, N = ⌈T / C⌉ (the last chunk
    is padded). Leading terms only (the O(T d) vector operations are left out).

    recurrent (per token): Sᵀk, the rank-1 write β k (v − Sᵀk)ᵀ, and o = Sᵀq: 3 · 2d²,
        so inter = 6 T d², intra = 0, T sequential steps.
    chunk (per chunk, as ``delta_rule_chunk_reference`` runs it):
        inside the chunk: K Kᵀ, Q Kᵀ and (Q Kᵀ ⊙ M) V_new, full C × C products (3 · 2C²d),
        and ``ut_transform``'s two unit lower-triangular solves, for W and for U, by forward
        substitution (2 · C(C − 1) d): intra = N (8C² − 2C) d;
        with the state: W S, Q S and Kᵀ V_new (3 · 2Cd²): inter = 6 N C d², the recurrent
        work again; N sequential steps.

    So the chunkwise form does *more* arithmetic, (8C − 2) / (6d) more, but in matrix products
    and in T / C sequential steps instead of T. The fast ``delta_rule_chunk`` spends a little
    more again (it forms 𝒯 = L⁻¹, about 2C³/3, and multiplies by the full C × C matrix, 2C²d
    per solve instead of C(C − 1) d), because on a CPU a matrix product runs several times
    faster than a solve.
    """
    check_choice("form", form, DELTA_FORMS)
    t = check_positive_int("length", length)
    d = check_positive_int("head_dim", head_dim)
    c = check_positive_int("chunk_size", chunk_size)
    if form == "recurrent":
        return DeltaRuleCost(
            intra_flops=0, inter_flops=6 * t * d * d, sequential_steps=t
        )
    n = -(-t // c)
    return DeltaRuleCost(
        intra_flops=n * (8 * c * c - 2 * c) * d,
        inter_flops=6 * n * c * d * d,
        sequential_steps=n,
    )

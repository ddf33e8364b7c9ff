"""The Part II self-checks name the mistakes Lessons 10, 13 and 14 warn about.

Each learner below is written from the lessons' equations, independently of the checker's own
mistake table (``attnlab._selfcheck_mistakes``): the test is that a real wrong answer gets the
diagnosis by name, not that the table agrees with itself.
"""

import pytest
import torch
from attnlab import selfcheck as sc


def _read(state, q):
    """o = Sᵀ q / √d_k."""
    return torch.einsum("bhkv,bhk->bhv", state, q / q.shape[-1] ** 0.5)


def _outer(k, v):
    return k[..., :, None] * v[..., None, :]


# --- KDA (Lesson 14): the order decay → erase → write -------------------------------------------

def kda_erase_then_decay(q, k, v, *, g, beta, state):
    """Erase along k with the old state, then decay, then write: Diag(α)(I − β k kᵀ) S + β k vᵀ."""
    b = beta[..., None, None]
    erased = state - b * _outer(k, torch.einsum("bhkv,bhk->bhv", state, k))
    new = g.exp()[..., :, None] * erased + b * _outer(k, v)
    return _read(new, q), new


def test_kda_checker_names_erase_decay_write():
    result = sc.check_kda_step(kda_erase_then_decay)
    assert not result.ok and result.mistake == "erase_before_decay", result
    assert "erase → decay → write" in result.message


def test_with_one_scalar_gate_the_two_orders_agree():
    """Gated DeltaNet's gate is a scalar: α (I − β k kᵀ) = (I − β k kᵀ) α, so the same order
    is correct there and the gated-delta checker passes it."""

    def scalar_gate(q, k, v, *, g, beta, state):
        per_channel = g[..., None].expand(*q.shape)
        return kda_erase_then_decay(q, k, v, g=per_channel, beta=beta, state=state)

    assert sc.check_gated_delta_step(scalar_gate)


# --- GLA (Lesson 10): which tensor the decay multiplies -----------------------------------------

def gla_decayed_key(q, k, v, *, g, state):
    """The decay lands on the new key, not on the state: S + (α ⊙ k) vᵀ."""
    new = state + _outer(g.exp() * k, v)
    return _read(new, q), new


def gla_decay_after_write(q, k, v, *, g, state):
    """Write first, then decay everything, the new pair included: Diag(α)(S + k vᵀ)."""
    new = g.exp()[..., :, None] * (state + _outer(k, v))
    return _read(new, q), new


@pytest.mark.parametrize(("learner", "mistake", "words"), [
    (gla_decayed_key, "decay_key_not_state", "instead of the state"),
    (gla_decay_after_write, "decay_after_write", "after the write"),
])
def test_gla_checker_tells_a_decayed_key_from_a_decay_after_the_write(learner, mistake, words):
    result = sc.check_gla_step(learner)
    assert not result.ok and result.mistake == mistake, result
    assert words in result.message


# --- one chunk of the delta rule (Lesson 13): the mask inside the chunk -------------------------

def delta_chunk_with_mask(mask_diagonal):
    """A WY / UT chunk by two triangular solves, with the chunk's scores masked by
    ``tril(mask_diagonal)`` (0 is right; −1 drops each token's own key; None is no mask)."""

    def learner(q, k, v, *, beta, state):
        q = q / q.shape[-1] ** 0.5
        b = beta[..., None]
        lower = torch.eye(k.shape[2]) + (b * (k @ k.transpose(-1, -2))).tril(-1)
        w = torch.linalg.solve_triangular(lower, b * k, upper=False)
        u = torch.linalg.solve_triangular(lower, b * v, upper=False)
        v_new = u - w @ state
        scores = q @ k.transpose(-1, -2)
        inside = scores if mask_diagonal is None else scores.tril(mask_diagonal)
        return q @ state + inside @ v_new, state + k.transpose(-1, -2) @ v_new

    return learner


@pytest.mark.parametrize(("mask_diagonal", "mistake", "words"), [
    (-1, "mask_strict", "own key"),
    (None, "no_mask", "later in its own chunk"),
])
def test_delta_chunk_checker_names_a_strict_or_missing_mask(mask_diagonal, mistake, words):
    assert sc.check_delta_chunk(delta_chunk_with_mask(0))
    result = sc.check_delta_chunk(delta_chunk_with_mask(mask_diagonal))
    assert not result.ok and result.mistake == mistake, result
    assert words in result.message

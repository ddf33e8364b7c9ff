"""Key/value pairs written into a fixed-size state and read back: the associative-memory
experiments of Lessons 7 and 9–12 (and 17's crosstalk prediction).

A state ``S [dim, dim]`` stores N pairs (k_i, v_i) as ``S = Σ k_i v_iᵀ`` (linear attention) or
by the delta rule, and is read back as ``Sᵀ k_i``. Every number here comes from the package's
kernels (:mod:`attnlab.linear`, :mod:`attnlab.gated`, :mod:`attnlab.delta`), with one batch and
one head: ``write_state`` and ``recall_error`` (shown in Lesson 9), the errors of every pair at
once with decays (``recall_errors_by_pair``, ``delta_recall_errors_by_pair``), the crosstalk
predicted for random keys (``expected_crosstalk``), and Lesson 12's stream of writes that
switches documents (``document_switch_stream``, ``switch_stream_state``,
``latest_value_errors``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab.checks import (
    check_choice,
    check_finite,
    check_positive_int,
    check_tensor,
    checked,
)
from attnlab.delta import (
    delta_rule_chunk,
    delta_rule_recurrent,
    gated_delta_rule_chunk,
)
from attnlab.gated import gla_chunk
from attnlab.linear import linear_attention_recurrent


def _check_batched_pairs(keys: object, values: object) -> dict[str, int]:
    """keys ``[B, N, Dk]`` and values ``[B, N, Dv]`` alike; returns their sizes."""
    sizes = check_tensor("keys", keys, ("B", "N", "Dk"))
    like = {"dtype": keys.dtype, "device": keys.device, "like": "keys"}
    check_tensor("values", values, ("B", "N", "Dv"), sizes, **like)
    return sizes


def _check_generator(generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator: expected a torch.Generator, got {type(generator).__name__}"
        )
    return generator


def associative_pairs(
    n_pairs: int,
    dim: int,
    *,
    orthogonal: bool,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_pairs`` key/value vectors to store in a ``dim × dim`` state: ``keys, values [N, dim]``.

    Keys are unit vectors: orthonormal (rows of a random orthogonal matrix, needs ``N ≤ dim``)
    if ``orthogonal``, else independent random directions. Values are standard normal.
    """
    check_positive_int("n_pairs", n_pairs)
    check_positive_int("dim", dim)
    generator = _check_generator(generator)
    if orthogonal and n_pairs > dim:
        raise ValueError(
            f"n_pairs: at most dim={dim} keys can be orthonormal in {dim} dimensions, got {n_pairs}"
        )
    gaussian = torch.randn(n_pairs, dim, generator=generator, dtype=dtype)
    if orthogonal:
        q, r = torch.linalg.qr(gaussian.T)  # q [dim, N], orthonormal columns
        keys = (
            q * torch.sign(torch.diagonal(r))
        ).T  # sign fix: a uniformly random frame
    else:
        keys = gaussian / gaussian.norm(dim=1, keepdim=True)
    values = torch.randn(n_pairs, dim, generator=generator, dtype=dtype)
    return keys, values


def _pairs(keys, values, write="add", beta=1.0, **_):
    """keys ``[N, Dk]`` (N >= 1) and values ``[N, Dv]`` like the keys, finite; the write kind;
    its β >= 0 with β‖k‖² <= 2 for every key (the delta rule's stability bound)."""
    sizes = check_tensor("keys", keys, ("N", "Dk"))
    like = {"dtype": keys.dtype, "device": keys.device, "like": "keys"}
    check_tensor("values", values, ("N", "Dv"), sizes, **like)
    if sizes["N"] == 0:
        raise ValueError("keys: expected at least one pair, got none")
    check_finite("keys", keys)
    check_finite("values", values)
    check_choice("write", write, ("add", "delta"))
    beta = _check_number("beta", beta, 0.0, math.inf)
    worst = beta * keys.detach().square().sum(-1).max().item()
    if write == "delta" and worst > 2 * (1 + 1e-9):
        raise ValueError(
            f"beta, keys: expected β‖k‖² <= 2 for every key (the delta rule's "
            f"stability bound), got up to {worst:.4g}"
        )


@checked(_pairs)
def write_state(keys, values, *, write, beta=1.0):
    """Write the pairs in order into a state S [dim, dim] from S = 0:

        add:    S ← S + k vᵀ              (linear attention: S = Σ k_i v_iᵀ)
        delta:  S ← S + β k (v − Sᵀ k)ᵀ    (the delta rule)

    keys, values [N, dim] -> S. The package's kernels, one batch, one head.
    """
    k, v = keys[None, None], values[None, None]  # one batch, one head
    if write == "add":  # the keys serve as queries: only the state is kept
        _, state = linear_attention_recurrent(
            k, k, v, output_final_state=True
        )
    else:
        betas = keys.new_full((1, 1, len(keys)), beta)  # [1, 1, N]
        _, state = delta_rule_recurrent(
            k, k, v, beta=betas, output_final_state=True
        )
    return state[0, 0]


@checked(_pairs)
def recall_error(keys, values, write="add", beta=1.0):
    """Mean relative error mean_i ‖Sᵀ k_i − v_i‖ / ‖v_i‖ of reading every
    value back from S = write_state(keys, values); keys, values [N, dim]."""
    state = write_state(keys, values, write=write, beta=beta)
    read = keys @ state  # row i is (Sᵀ k_i)ᵀ: [N, Dv]
    return ((read - values).norm(dim=1) / values.norm(dim=1)).mean().item()


def recall_errors_by_pair(
    keys: torch.Tensor, values: torch.Tensor, *, g: torch.Tensor | None = None
) -> torch.Tensor:
    """The relative error of reading back each pair from a state written with (decayed) adds.

        S_N = Σ_i (Π_{s=i+1}^{N} Diag(α_s)) k_i v_iᵀ,      α_s = exp(g_s)         (``gla_chunk``)
        error_i = ‖S_Nᵀ k_i − v_i‖ / ‖v_i‖

    ``keys [B, N, Dk]`` and ``values [B, N, Dv]`` are B independent sets of N pairs, written in
    order. ``g=None`` means no decay (plain additive writes, ``S_N = Σ_i k_i v_iᵀ``); otherwise
    the log-decays ``g <= 0`` are ``[B, H, N]`` (a scalar per step) or ``[B, H, N, Dk]`` (one per
    key channel): H states written with the same pairs and different gates. Returns the errors
    ``[B, H, N]`` (H = 1 when ``g`` is None); pair i's error includes its fading, 1 − Π α.
    """
    sizes = _check_batched_pairs(keys, values)
    b, n = sizes["B"], sizes["N"]
    if g is None:
        g = keys.new_zeros(b, 1, n)
    elif not isinstance(g, torch.Tensor) or g.dim() not in (3, 4):
        raise ValueError(
            "g: expected None or a tensor [B, H, N] or [B, H, N, Dk], got "
            f"{tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__}"
        )
    heads = g.shape[1]
    k = keys[:, None].expand(b, heads, n, sizes["Dk"])  # [B, H, N, Dk]
    v = values[:, None].expand(b, heads, n, sizes["Dv"])  # [B, H, N, Dv]
    # q is not used; gla_chunk checks g against k
    _, state = gla_chunk(k, k, v, g=g, scale=1.0, output_final_state=True)
    read = k @ state  # row i is (S_Nᵀ k_i)ᵀ: [B, H, N, Dv]
    return (read - v).norm(dim=-1) / v.norm(dim=-1)


def mean_recall_error(
    n_pairs: int,
    dim: int,
    *,
    orthogonal: bool,
    n_trials: int = 16,
    seed: int = 0,
) -> float:
    """``recall_error`` of additive writes, averaged over ``n_trials`` independent draws of
    ``associative_pairs(n_pairs, dim, orthogonal=…)`` (one generator seeded with ``seed``) and
    over the pairs: the mean of ‖Sᵀ k_i − v_i‖ / ‖v_i‖ with ``S = Σ k_i v_iᵀ``."""
    check_positive_int("n_trials", n_trials)
    generator = torch.Generator().manual_seed(seed)
    draws = [
        associative_pairs(
            n_pairs, dim, orthogonal=orthogonal, generator=generator
        )
        for _ in range(n_trials)
    ]
    keys = torch.stack([k for k, _ in draws])  # [n_trials, N, dim]
    values = torch.stack([v for _, v in draws])
    return recall_errors_by_pair(keys, values).mean().item()


def expected_crosstalk(
    n_pairs: int, dim: int, *, alpha: float = 1.0
) -> float:
    """The predicted root-mean-square crosstalk, relative to ‖v‖, with random unit keys:

        Sᵀ k_j − v_j = Σ_{i≠j} (k_i·k_j) v_i,     E[(k_i·k_j)²] = 1/dim,   E‖v_i‖² = E‖v_j‖²
        ⇒  E‖Sᵀ k_j − v_j‖² / E‖v_j‖² = (n_pairs − 1) / dim

    for keys drawn independently and uniformly on the unit sphere of ``R^dim`` and independent
    values (``associative_pairs(..., orthogonal=False)``): ``sqrt((n_pairs − 1) / dim)``, the
    same for every pair. With a constant decay ``alpha`` in (0, 1] per write, pair i enters
    with weight α^(n_pairs − i); for the newest pair the crosstalk is

        sqrt(Σ_{a=1}^{n_pairs−1} α^(2a) / dim) = sqrt(α² (1 − α^(2(n_pairs−1))) / ((1 − α²) dim)),

    which stays below ``sqrt(α² / ((1 − α²) dim))`` however long the stream.
    """
    n = check_positive_int("n_pairs", n_pairs)
    d = check_positive_int("dim", dim)
    alpha = _check_number("alpha", alpha, 0.0, 1.0, low_open=True)
    if alpha == 1.0:
        return ((n - 1) / d) ** 0.5
    log_a2 = 2 * math.log(alpha)
    # Σ α^(2a)
    total = (
        math.exp(log_a2) * math.expm1((n - 1) * log_a2) / math.expm1(log_a2)
    )
    return (total / d) ** 0.5


def _check_number(
    name: str, value: object, low: float, high: float, low_open: bool = False
):
    """A real number (not a bool) in [low, high] (or (low, high] with ``low_open``)."""
    ok = not isinstance(value, bool) and isinstance(value, int | float)
    if ok:
        ok = (low < value if low_open else low <= value) and value <= high
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise ValueError(
            f"{name}: expected a number in {interval}, got {value!r}"
        )
    return float(value)


def delta_recall_errors_by_pair(
    keys: torch.Tensor, values: torch.Tensor, *, beta: float = 1.0
) -> torch.Tensor:
    """The relative error of reading back each pair from a state written by the delta rule.

        S_i = S_{i-1} + β k_i (v_i − S_{i-1}ᵀ k_i)ᵀ,   S_0 = 0        (``delta_rule_chunk``)
        error_i = ‖S_Nᵀ k_i − v_i‖ / ‖v_i‖

    ``keys [B, N, Dk]`` and ``values [B, N, Dv]`` are B independent sets of N pairs, written in
    order with one constant ``beta`` in [0, 2]. Returns the errors ``[B, N]`` after all N
    writes (with unit keys and β = 1 the last pair is read back exactly). The additive
    counterpart is :func:`recall_errors_by_pair`.
    """
    sizes = _check_batched_pairs(keys, values)
    beta = _check_number("beta", beta, 0.0, 2.0)
    k, v = keys[:, None], values[:, None]  # one head: [B, 1, N, D]
    betas = keys.new_full((sizes["B"], 1, sizes["N"]), beta)
    _, state = delta_rule_chunk(
        k, k, v, beta=betas, scale=1.0, output_final_state=True
    )
    read = k @ state  # row i is (S_Nᵀ k_i)ᵀ: [B, 1, N, Dv]
    return ((read - v).norm(dim=-1) / v.norm(dim=-1))[:, 0]


SWITCH_MIXERS = ("gla", "deltanet", "gdn", "latest_only")
"""How :func:`switch_stream_state` can write a :class:`SwitchStream`."""


@dataclass(frozen=True)
class SwitchStream:
    """Key/value writes in which the document changes (made by :func:`document_switch_stream`).

    ``keys, values [S, T, dim]``: S sequences of T = n_old + n_new + n_overwrite writes.
    ``boundary``: the position of the new document's first write (= n_old).
    ``query_keys [S, n_new, dim]``: the new document's keys; ``targets [S, n_new, dim]``: their
    latest values (the first ``n_overwrite`` keys were overwritten).
    ``query_noise [S, n_new, dim]``: a perturbation with entries N(0, 1/dim), norm about 1.
    """

    keys: torch.Tensor
    values: torch.Tensor
    boundary: int
    query_keys: torch.Tensor
    targets: torch.Tensor
    query_noise: torch.Tensor
    n_overwrite: int


def document_switch_stream(
    n_old: int,
    n_new: int,
    n_overwrite: int,
    dim: int,
    *,
    n_sequences: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
) -> SwitchStream:
    """S = ``n_sequences`` streams of writes that switch documents (Lesson 12's test):

        old document   n_old pairs with random unit keys — with n_old ≫ dim, more than a
                       dim × dim state can hold
        new document   n_new pairs with orthonormal keys (n_new ≤ dim), then the first
                       n_overwrite of these keys again, with new values

    Values are standard normal. The task: after the last write, read the latest value of each
    key of the new document. Its keys are orthonormal so that additive writes of the new
    document have no crosstalk: what can go wrong is the old document and the overwrites.
    """
    for name, value in [
        ("n_old", n_old),
        ("n_new", n_new),
        ("dim", dim),
        ("n_sequences", n_sequences),
    ]:
        check_positive_int(name, value)
    if n_new > dim:
        raise ValueError(
            f"n_new: at most dim={dim} keys can be orthonormal, got {n_new}"
        )
    if (
        isinstance(n_overwrite, bool)
        or not isinstance(n_overwrite, int)
        or not (0 <= n_overwrite <= n_new)
    ):
        raise ValueError(
            f"n_overwrite: expected an integer in [0, n_new={n_new}], "
            f"got {n_overwrite!r}"
        )
    generator = _check_generator(generator)
    s = n_sequences
    old_keys = torch.randn(s, n_old, dim, generator=generator, dtype=dtype)
    old_keys = old_keys / old_keys.norm(dim=-1, keepdim=True)
    old_values = torch.randn(s, n_old, dim, generator=generator, dtype=dtype)
    frame, _ = torch.linalg.qr(
        torch.randn(s, dim, dim, generator=generator, dtype=dtype)
    )
    # [S, n_new, dim], orthonormal rows
    new_keys = frame[..., :n_new].transpose(-1, -2)
    new_values = torch.randn(s, n_new, dim, generator=generator, dtype=dtype)
    later_values = torch.randn(
        s, n_overwrite, dim, generator=generator, dtype=dtype
    )
    noise = (
        torch.randn(s, n_new, dim, generator=generator, dtype=dtype)
        / dim**0.5
    )
    return SwitchStream(
        keys=torch.cat(
            [old_keys, new_keys, new_keys[:, :n_overwrite]], dim=1
        ),
        values=torch.cat([old_values, new_values, later_values], dim=1),
        boundary=n_old,
        query_keys=new_keys,
        targets=torch.cat([later_values, new_values[:, n_overwrite:]], dim=1),
        query_noise=noise,
        n_overwrite=n_overwrite,
    )


def switch_stream_state(
    stream: SwitchStream,
    mixer: str,
    *,
    alpha_boundary: float = 1.0,
    alpha: float = 1.0,
    beta: float = 1.0,
) -> torch.Tensor:
    """The state ``[S, dim, dim]`` (read as Sᵀq) after writing ``stream`` with one mixer:

        gla          S_t = α_t S_{t-1} + k_t v_tᵀ                        (scalar gate, no β)
        deltanet     S_t = S_{t-1} + β k_t (v_t − S_{t-1}ᵀ k_t)ᵀ         (no gate)
        gdn          S_t = α_t (I − β k_t k_tᵀ) S_{t-1} + β k_t v_tᵀ
        latest_only  S = Σ_j k_j v_jᵀ over the new document's keys and latest values: what a
                     perfect memory of the current document holds (a reference, not a mixer)

    α_t is ``alpha_boundary`` at the new document's first write and ``alpha`` at every other
    write (a data-dependent gate can close at a boundary and stay open inside a document). A
    mixer ignores the arguments it does not have (β for gla, both α's for deltanet).
    Computed with ``gla_chunk``, ``delta_rule_chunk`` and ``gated_delta_rule_chunk``.
    """
    check_choice("mixer", mixer, SWITCH_MIXERS)
    alpha_boundary = _check_number(
        "alpha_boundary", alpha_boundary, 0.0, 1.0, low_open=True
    )
    alpha = _check_number("alpha", alpha, 0.0, 1.0, low_open=True)
    beta = _check_number("beta", beta, 0.0, 2.0)
    if mixer == "latest_only":
        return stream.query_keys.transpose(-1, -2) @ stream.targets
    # one head: [S, 1, T, dim]
    k, v = (stream.keys[:, None], stream.values[:, None])
    s, _, t, _ = k.shape
    g = k.new_full((s, 1, t), math.log(alpha))
    g[:, :, stream.boundary] = math.log(alpha_boundary)
    betas = k.new_full((s, 1, t), beta)
    if mixer == "gla":
        _, state = gla_chunk(k, k, v, g=g, scale=1.0, output_final_state=True)
    elif mixer == "deltanet":
        _, state = delta_rule_chunk(
            k, k, v, beta=betas, scale=1.0, output_final_state=True
        )
    else:
        _, state = gated_delta_rule_chunk(
            k, k, v, g=g, beta=betas, scale=1.0, output_final_state=True
        )
    return state[:, 0]


def latest_value_errors(
    stream: SwitchStream, state: torch.Tensor, *, query_noise: float = 0.0
) -> tuple[float, float]:
    """Mean relative error of reading the new document's latest values from ``state``:

        q_j = k_j + query_noise · ε_j,      error_j = ‖Sᵀ q_j − v_j‖ / ‖v_j‖   (v_j the latest)

    ``state [S, dim, dim]`` as from :func:`switch_stream_state`; ε_j is ``stream.query_noise``
    (norm about 1), so ``query_noise`` is the query's distance from its key relative to the
    key's length (in a trained layer q and k come from different projections and never match
    exactly; 0 means exact queries). Returns (mean error over the overwritten keys, mean error
    over the unchanged keys), each averaged over the S sequences; NaN for an empty group.
    """
    sizes = check_tensor(
        "stream.query_keys", stream.query_keys, ("S", "N", "Dk")
    )
    check_tensor("stream.targets", stream.targets, ("S", "N", "Dv"), sizes)
    check_tensor(
        "state",
        state,
        ("S", "Dk", "Dv"),
        sizes,
        dtype=stream.query_keys.dtype,
        device=stream.query_keys.device,
        like="stream.query_keys",
    )
    query_noise = _check_number("query_noise", query_noise, 0.0, math.inf)
    queries = stream.query_keys + query_noise * stream.query_noise
    read = queries @ state  # row j is (Sᵀ q_j)ᵀ: [S, n_new, Dv]
    errors = (read - stream.targets).norm(dim=-1) / stream.targets.norm(
        dim=-1
    )
    n = stream.n_overwrite
    return errors[:, :n].mean().item(), errors[:, n:].mean().item()

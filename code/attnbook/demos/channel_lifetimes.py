"""Lesson 14's experiment: one decay per key channel against one decay per head, at the same
state size, on facts of two lifetimes.

Each sequence writes, with the delta rule (β = 1) into a ``DK × DV`` state:

1. ``N_LONG`` long-lived facts, with orthonormal keys in the first ``N_LONG`` key channels (a
   random basis of that subspace);
2. then ``N_SHORT_WRITES`` short-lived facts, with random unit keys in the other ``DK − N_LONG``
   channels: each new one makes the older ones stale.

At the end the state is read with noisy queries ``q = k + noise·ε`` (``ε`` a random unit
vector) for every long fact and for the ``N_RECENT`` latest short ones. The score is the mean
relative read error ``‖Sᵀq − v‖ / ‖v‖`` of each group, averaged over the two groups. Reading the
long facts needs no decay in their channels; reading the recent short facts through noise needs
the stale short facts cleared, which a decay in the short channels does. One decay per head must
do both with one number; one decay per channel can keep one group and clear the other.

Both kinds of gate are constant over the sequence and tuned by grid: the per-head decay over
``GRID``, the per-channel decays over every pair (decay of the long channels, decay of the short
channels) from ``GRID``; the per-head decays are the pairs on the diagonal. One call of
:func:`attnlab.kda.kda_recurrent` runs every pair as a head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.checks import check_int_in
from attnlab.kda import kda_recurrent

DK = DV = 8
N_LONG = 4
N_SHORT_WRITES = 60
N_RECENT = 2
NOISE = 0.5
N_SEQUENCES = 32
SEEDS = (0, 1, 2, 3, 4)
#: The constant decays tried, for one decay per head and for each channel group.
GRID = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1)


def lifetime_stream(seed: int, n_sequences: int = N_SEQUENCES):
    """Keys ``[N, T, DK]``, values ``[N, T, DV]`` and the read-out queries and targets of the
    long facts and the recent short facts (``[N, n, DK]``, ``[N, n, DV]``), float64."""
    n = check_int_in("n_sequences", n_sequences, 1, 4096)
    seed = check_int_in("seed", seed, 0, 2**31 - 1)
    gen = torch.Generator().manual_seed(seed)
    f64 = {"generator": gen, "dtype": torch.float64}
    basis, _ = torch.linalg.qr(torch.randn(n, N_LONG, N_LONG, **f64))
    # rows: an orthonormal basis of the long channels, zero in the others
    long_keys = F.pad(basis.mT, (0, DK - N_LONG))
    short_keys = F.pad(
        _unit(torch.randn(n, N_SHORT_WRITES, DK - N_LONG, **f64)), (N_LONG, 0)
    )
    keys = torch.cat([long_keys, short_keys], dim=1)
    values = _unit(torch.randn(n, keys.shape[1], DV, **f64))
    t = keys.shape[1]
    read = [*range(N_LONG), *range(t - N_RECENT, t)]  # long, recent short
    noise = NOISE * _unit(torch.randn(n, len(read), DK, **f64))
    return keys, values, keys[:, read] + noise, values[:, read]


def lifetime_errors(seed: int, n_sequences: int = N_SEQUENCES):
    """Mean relative read errors ``[2, len(GRID), len(GRID)]``: of the long facts (0) and of the
    recent short facts (1), for every pair (decay of the long channels, decay of the short
    channels); the diagonal is one decay per head."""
    keys, values, queries, targets = lifetime_stream(seed, n_sequences)
    n, t, _ = keys.shape
    grid = torch.tensor(GRID, dtype=torch.float64)
    pairs = torch.cartesian_prod(grid, grid)  # [P, 2]: (long, short)
    alpha = pairs.repeat_interleave(
        torch.tensor([N_LONG, DK - N_LONG]), dim=1
    )  # [P, DK]: the long channels' decay, then the short channels'
    h = alpha.shape[0]
    g = alpha.log()[None, :, None].expand(n, h, t, DK)
    k = keys[:, None].expand(n, h, t, DK)
    v = values[:, None].expand(n, h, t, DV)
    beta = torch.ones(n, h, t, dtype=torch.float64)
    _, state = kda_recurrent(k, k, v, g=g, beta=beta, output_final_state=True)
    reads = torch.einsum("nhkv,nrk->nhrv", state, queries)  # Sᵀ q
    # relative error ‖Sᵀq − v‖ / ‖v‖, the targets v being unit vectors
    error = (reads - targets[:, None]).norm(dim=-1)
    groups = torch.stack(
        [error[..., :N_LONG].mean(-1), error[..., N_LONG:].mean(-1)]
    )  # [2, N, P]
    return groups.mean(1).view(2, len(GRID), len(GRID))


def lifetime_experiment(seeds=SEEDS) -> dict:
    """Per seed, both kinds of gate tuned on that seed for the lowest score (the mean of the two
    groups' errors): the per-head decay, the per-channel pair (long, short), the score and the
    two groups' errors (long, recent short) of each; and the per-head score over ``GRID``."""
    rows = []
    for seed in seeds:
        groups = lifetime_errors(seed)
        score = groups.mean(0)  # [G, G]
        head = int(score.diagonal().argmin())
        long_i, short_i = divmod(int(score.argmin()), len(GRID))
        rows.append(
            {
                "seed": seed,
                "head_curve": score.diagonal(),
                "head_alpha": GRID[head],
                "head_score": score[head, head].item(),
                "head_groups": groups[:, head, head].tolist(),
                "channel_alpha": (GRID[long_i], GRID[short_i]),
                "channel_score": score[long_i, short_i].item(),
                "channel_groups": groups[:, long_i, short_i].tolist(),
            }
        )
    return {"rows": rows, "grid": GRID}

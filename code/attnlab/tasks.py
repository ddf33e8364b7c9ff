"""The synthetic training task: multi-query associative recall (MQAR).

MQAR (Zoology; Arora, Eyuboglu et al. 2023) asks a model to store ``N`` key-value pairs and
then answer a query for every key. It is the course's probe of what a fixed-size state can
remember. The layout here is a compact one (length ``L = 4N``, no padding; the Notation
appendix, §9, describes Zoology's own)::

    position   0   1   2   3  ...  2N-2  2N-1 | 2N   2N+1  2N+2  2N+3 ...
    input      k1  v1  k2  v2 ...  kN    vN   | kπ1  vπ1   kπ2   vπ2  ...
    target     .   .   .   .  ...  .     .    | vπ1  .     vπ2   .    ...

where ``π`` is a random order of the keys and ``.`` is ``IGNORE`` (−100, skipped by
``torch.nn.functional.cross_entropy``). The target at a query position ``t`` is the *next* token
``input[t + 1]``, the value paired with that key: a causal language model reading ``kπj`` must
predict ``vπj``. Keys are distinct tokens from the lower half of the vocabulary (token 0 is
reserved and never used), values distinct tokens from the upper half.
"""

from __future__ import annotations

import torch

from .checks import check_positive_int, checked

IGNORE = -100
"""Target at positions that are not scored (the ``ignore_index`` of ``cross_entropy``)."""


def _sample_distinct(
    batch_size: int,
    count: int,
    low: int,
    high: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``count`` distinct integers from ``[low, high)`` for each row: ``[batch_size, count]``."""
    order = torch.rand(batch_size, high - low, generator=generator).argsort(
        dim=1
    )
    return order[:, :count] + low


def mqar_key_range(vocab_size: int) -> tuple[int, int]:
    """Key tokens are ``range(1, vocab_size // 2)`` (token 0 is reserved): returns (low, high)."""
    return 1, vocab_size // 2


def mqar_value_range(vocab_size: int) -> tuple[int, int]:
    """Value tokens are ``range(vocab_size // 2, vocab_size)``: returns (low, high)."""
    return vocab_size // 2, vocab_size


def _mqar_inputs(batch_size, n_pairs, vocab_size, generator):
    check_positive_int("batch_size", batch_size)
    check_positive_int("n_pairs", n_pairs)
    check_positive_int("vocab_size", vocab_size)
    if vocab_size < 4:
        raise ValueError(
            "vocab_size: expected at least 4 (keys and values), "
            f"got {vocab_size}"
        )
    key_low, key_high = mqar_key_range(vocab_size)
    value_low, value_high = mqar_value_range(vocab_size)
    n_keys = min(key_high - key_low, value_high - value_low)
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs: expected at most {n_keys} distinct keys "
            f"for vocab_size={vocab_size}, got {n_pairs}"
        )
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator: expected a torch.Generator, got {type(generator).__name__}"
        )


@checked(_mqar_inputs)
def mqar_batch(batch_size, n_pairs, *, vocab_size=128, generator):
    """A batch of MQAR sequences (the layout of the module docstring):
    ``(input_ids, targets)``, both int64 ``[batch_size, 4 * n_pairs]``.

    ``targets[b, t] = input_ids[b, t + 1]`` (the paired value) at the query
    positions t = 2N, 2N + 2, …, 4N − 2, ``IGNORE`` elsewhere. Keys and
    values are distinct; each key is queried once, in a random order.
    """
    key_low, key_high = mqar_key_range(vocab_size)
    value_low, value_high = mqar_value_range(vocab_size)
    # [B, N]
    keys = _sample_distinct(batch_size, n_pairs, key_low, key_high, generator)
    # [B, N]
    values = _sample_distinct(
        batch_size, n_pairs, value_low, value_high, generator
    )
    # [B, N]
    order = torch.rand(batch_size, n_pairs, generator=generator).argsort(
        dim=1
    )
    query_keys = keys.gather(1, order)
    query_values = values.gather(1, order)

    context = torch.stack([keys, values], dim=2).reshape(
        batch_size, 2 * n_pairs
    )
    queries = torch.stack([query_keys, query_values], dim=2).reshape(
        batch_size, 2 * n_pairs
    )
    input_ids = torch.cat([context, queries], dim=1)  # [B, 4N]

    targets = torch.full_like(input_ids, IGNORE)
    targets[:, 2 * n_pairs :: 2] = query_values
    return input_ids, targets


def mqar_eval_set(
    n_sequences: int, n_pairs: int, seed: int, *, vocab_size: int = 128
) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed MQAR evaluation set: ``mqar_batch`` drawn from a generator seeded with ``seed``.

    The same arguments always give the same tensors, so every model and training seed can be
    scored on one shared set. Shapes ``[n_sequences, 4 * n_pairs]``.
    """
    generator = torch.Generator().manual_seed(seed)
    return mqar_batch(
        n_sequences, n_pairs, vocab_size=vocab_size, generator=generator
    )

"""The mistakes the self-checks recognise: what a common error would output, and its diagnosis.

Each ``*_mistakes`` function returns ``{name: (make, diagnosis)}``: ``make()`` computes what a
function with that one mistake outputs on the given inputs, so ``attnlab.selfcheck`` can name
the mistake a learner's output reproduces. Shapes follow the package: ``[B, H, T, D]`` for
attention, one token ``[B, H, D]`` and a state ``[B, H, Dk, Dv]`` for the recurrent steps.
"""

from __future__ import annotations

import math

import torch

from . import attention


def sdpa(
    q, k, v, *, scale, causal, axis=-1, mask_after=False, fill=float("-inf")
):
    """Attention with one knob per common mistake (which softmax axis, how the mask is applied)."""
    scores = scale * q @ k.transpose(-2, -1)
    allowed = (
        attention.causal_mask(q.shape[2], k.shape[2]) if causal else None
    )
    if allowed is not None and not mask_after:
        scores = scores.masked_fill(~allowed, fill)
    weights = torch.softmax(scores, dim=axis)
    if allowed is not None and mask_after:
        weights = weights * allowed
    return weights @ v


def attention_mistakes(q, k, v, causal: bool) -> dict:
    d = q.shape[-1]
    s = 1 / math.sqrt(d)
    flip = [2]
    mistakes = {
        "no_scale": (
            lambda: sdpa(q, k, v, scale=1.0, causal=causal),
            "off by a factor √d_k inside the softmax: is the scale 1/√d_k applied?",
        ),
        "scale_1_over_d": (
            lambda: sdpa(q, k, v, scale=1 / d, causal=causal),
            "scaled by 1/d_k instead of 1/√d_k.",
        ),
        "softmax_axis": (
            lambda: sdpa(q, k, v, scale=s, causal=causal, axis=-2),
            "the weights of a query do not sum to 1: did you softmax over the wrong "
            "axis? Normalise each query's row of scores (dim=-1).",
        ),
        "no_softmax": (
            lambda: s * q @ k.transpose(-2, -1) @ v,
            "the output is the raw scores times V: apply the softmax to the scores.",
        ),
    }
    if causal:
        mistakes |= {
            "mask_missing": (
                lambda: sdpa(q, k, v, scale=s, causal=False),
                "future tokens change the output: the causal mask is missing.",
            ),
            "mask_transposed": (
                lambda: sdpa(
                    q.flip(flip),
                    k.flip(flip),
                    v.flip(flip),
                    scale=s,
                    causal=True,
                ).flip(flip),
                "future tokens change the output: the mask is transposed (token i must see "
                "keys j ≤ i, the lower triangle, torch.tril).",
            ),
            "mask_after_softmax": (
                lambda: sdpa(q, k, v, scale=s, causal=True, mask_after=True),
                "the weights of a query do not sum to 1: mask the scores with -inf before the "
                "softmax, not the weights after it.",
            ),
            "mask_with_zero": (
                lambda: sdpa(q, k, v, scale=s, causal=True, fill=0.0),
                "future tokens still get weight: a masked score set to 0 becomes exp(0) = 1; "
                "fill it with -inf.",
            ),
        }
    else:
        mistakes["masked"] = (
            lambda: sdpa(q, k, v, scale=s, causal=True),
            "you applied a causal mask; this check wants attention without one "
            "(check_causal_attention tests the masked kind).",
        )
    return mistakes


def decode_mistakes(q_t, keys, values) -> dict:
    s = 1 / math.sqrt(q_t.shape[-1])
    return {
        "no_scale": (
            lambda: sdpa(q_t, keys, values, scale=1.0, causal=False),
            "off by a factor √d_k inside the softmax: is the scale applied?",
        ),
        "square_mask": (
            lambda: values[:, :, :1],
            "the step attends only to the first token: a causal mask built for a "
            "square matrix keeps only key 1 of a 1 × t row. No mask is needed: the "
            "cache holds only the past and the present.",
        ),
        "attend_before_append": (
            lambda: sdpa(
                q_t, keys[:, :, :-1], values[:, :, :-1], scale=s, causal=False
            ),
            "the new token does not see itself: append (k_t, v_t) to the cache before "
            "computing the scores.",
        ),
    }


def simulate(
    q, k, v, beta, alpha, state, *, kind: str, mistake: str | None = None
):
    """One step of the family S' = α ⊙ S;  S ← S' + β k (v − S'ᵀ k)ᵀ;  o = Sᵀ (q / √d_k),
    with ``mistake`` naming one common error. alpha ``[B, H, Dk, 1]``; linear attention has no
    correction (S ← S + k vᵀ)."""
    s = 1.0 if mistake == "no_scale" else 1 / math.sqrt(q.shape[-1])
    b = torch.ones_like(beta) if mistake == "no_beta" else beta
    old = state
    a = {"gate_not_exp": alpha.log(), "no_decay": torch.ones_like(alpha)}.get(
        mistake, alpha
    )
    decayed = a * state
    if mistake == "normalised_keys":
        k = k / k.norm(dim=-1, keepdim=True)
    if mistake in (
        "decay_after_write",
        "decay_key_not_state",
        "erase_before_decay",
    ):
        decayed = state  # the state is not decayed before the write
    if mistake == "decay_key_not_state":
        k = a[..., 0] * k  # α ⊙ k: the new key decayed instead
    predict_from = state if mistake == "predict_undecayed" else decayed
    prediction = torch.einsum(
        "bhkv,bhk->bhv",
        predict_from,
        s * q if mistake == "predict_with_q" else k,
    )
    if kind in ("linear", "gla") or mistake == "no_correction":
        new = decayed + b[..., None, None] * k[..., :, None] * v[..., None, :]
    elif mistake == "beta_on_v_only":
        new = (
            decayed
            + k[..., :, None] * (b[..., None] * v - prediction)[..., None, :]
        )
    elif mistake == "sign_flipped":
        new = (
            decayed
            + b[..., None, None]
            * k[..., :, None]
            * (prediction - v)[..., None, :]
        )
    else:
        new = (
            decayed
            + b[..., None, None]
            * k[..., :, None]
            * (v - prediction)[..., None, :]
        )
    if mistake == "decay_after_write":
        new = a * new
    if mistake == "erase_before_decay":  # Diag(α) (I − β k kᵀ) S + β k vᵀ
        erased = (
            state
            - b[..., None, None] * k[..., :, None] * prediction[..., None, :]
        )
        new = (
            a * erased
            + b[..., None, None] * k[..., :, None] * v[..., None, :]
        )
    read = old if mistake == "read_before_write" else new
    return torch.einsum("bhkv,bhk->bhv", read, s * q), new


STEP_MISTAKES = {
    "read_before_write": "the output reads the state from before this token's write: update the "
    "state first, then read o = Sᵀ q (the token sees itself).",
    "no_scale": "the output is √d_k too large: scale q by 1/√d_k before the read.",
    "no_correction": "matches while the state is empty but not once it holds something: the "
    "write is additive. Subtract the prediction: v − Sᵀk.",
    "no_beta": "your step writes as if β were 1: β must multiply the whole correction "
    "β (v − Sᵀk), so that β = 0 leaves the state unchanged.",
    "beta_on_v_only": "β scales only v in your correction, so even β = 0 would erase the old "
    "value: β multiplies the whole correction β (v − Sᵀk).",
    "sign_flipped": "the correction has the wrong sign: it is v − Sᵀk (target minus prediction).",
    "predict_with_q": "the prediction uses q: the state is corrected where it is written, at the "
    "key (v − Sᵀk).",
    "normalised_keys": "matches for unit-length keys but not for others: the step takes k as "
    "given (the layer normalises keys before the kernel).",
    "no_decay": "the gate is ignored: decay the state by α = exp(g) first.",
    "gate_not_exp": "g is the log of the decay: multiply by α = exp(g), not by g.",
    "decay_after_write": "the decay is applied after the write, so the new pair is decayed too: "
    "decay first, S' = α S, then write into S' (the new pair arrives undecayed).",
    "decay_key_not_state": "the decay multiplies the new key instead of the state: decay the "
    "state's rows, Diag(α) S, and write k vᵀ undecayed.",
    "erase_before_decay": "the order is erase → decay → write: the state is erased along k "
    "before it is decayed. Decay first, S' = Diag(α) S, then erase and write on S': "
    "S ← S' + β k (v − S'ᵀk)ᵀ (with one decay per channel the two orders differ).",
    "predict_undecayed": "is the decay applied before the correction? The prediction S'ᵀk must "
    "read the decayed state S' = α S, not the old S.",
}

KIND_MISTAKES = {
    "linear": ("read_before_write", "no_scale"),
    "delta": (
        "read_before_write",
        "no_scale",
        "no_correction",
        "no_beta",
        "beta_on_v_only",
        "sign_flipped",
        "predict_with_q",
        "normalised_keys",
    ),
}
KIND_MISTAKES["gated"] = KIND_MISTAKES["delta"] + (
    "no_decay",
    "gate_not_exp",
    "decay_after_write",
    "predict_undecayed",
)
KIND_MISTAKES["kda"] = KIND_MISTAKES["gated"] + ("erase_before_decay",)
KIND_MISTAKES["gla"] = KIND_MISTAKES["linear"] + (
    "no_decay",
    "gate_not_exp",
    "decay_after_write",
    "decay_key_not_state",
)


def step_mistakes(kind: str, q, k, v, beta, g, state) -> dict:
    """Each mistake the checker knows for ``kind``: (what it would output, its diagnosis)."""
    dk = q.shape[-1]
    if kind in ("kda", "gla"):
        alpha = g.exp()
    elif kind == "gated":
        alpha = g.exp()[..., None].expand(-1, -1, dk)
    else:
        alpha = torch.ones_like(q)

    def output(mistake: str) -> torch.Tensor:
        return simulate(
            q, k, v, beta, alpha[..., None], state, kind=kind, mistake=mistake
        )[0]

    return {
        m: (lambda m=m: output(m), STEP_MISTAKES[m])
        for m in KIND_MISTAKES[kind]
    }


def block_mistakes(x, mixer, mlp, mixer_norm, mlp_norm) -> dict:
    """The usual ways to wire a pre-norm block wrong (x ``[B, T, d]``)."""

    def post_norm():
        h = mixer_norm(x + mixer(x))
        return mlp_norm(h + mlp(h))

    def no_mixer_residual():
        h = mixer(mixer_norm(x))
        return h + mlp(mlp_norm(h))

    def no_mlp_residual():
        h = x + mixer(mixer_norm(x))
        return mlp(mlp_norm(h))

    def normed_residual():
        n = mixer_norm(x)
        h = n + mixer(n)
        m = mlp_norm(h)
        return m + mlp(m)

    def parallel():
        return x + mixer(mixer_norm(x)) + mlp(mlp_norm(x))

    def norms_swapped():
        h = x + mixer(mlp_norm(x))
        return h + mlp(mixer_norm(h))

    def mlp_first():
        h = x + mlp(mlp_norm(x))
        return h + mixer(mixer_norm(h))

    return {
        "post_norm": (
            post_norm,
            "you normalise after adding (post-norm, the 2017 layout): "
            "normalise the input of each branch, x + Mixer(RMSNorm(x)), "
            "and leave the sum itself unnormalised.",
        ),
        "no_mixer_residual": (
            no_mixer_residual,
            "the attention branch replaces x instead of adding to "
            "it: x ← x + Mixer(RMSNorm(x)) keeps the stream.",
        ),
        "no_mlp_residual": (
            no_mlp_residual,
            "the MLP branch replaces the stream instead of adding to "
            "it: x ← x + MLP(RMSNorm(x)).",
        ),
        "normed_residual": (
            normed_residual,
            "you add the branch to the normalised x: the residual must "
            "carry x itself, x + Mixer(RMSNorm(x)).",
        ),
        "parallel": (
            parallel,
            "the MLP reads the block's input, not the stream after "
            "attention (that is the parallel block of GPT-J and PaLM): "
            "add the mixer's output first, then run the MLP on the sum.",
        ),
        "norms_swapped": (
            norms_swapped,
            "the two norms are swapped: mixer_norm goes before the "
            "mixer, mlp_norm before the MLP (each has its own gain).",
        ),
        "mlp_first": (
            mlp_first,
            "the MLP runs before the mixer: attention comes first in "
            "the block, then the MLP.",
        ),
    }


def chunk_mistakes(q, k, v, state) -> dict:
    """The usual mistakes in one chunk of chunkwise linear attention (q, k
    ``[B, H, C, Dk]``, v ``[B, H, C, Dv]``, state ``[B, H, Dk, Dv]``): what
    each would output for O = s Q S + (s Q Kᵀ ⊙ M) V."""
    s = 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-1, -2)

    def out(inside: torch.Tensor, scale: float = s, carried: bool = True):
        past = scale * q @ state if carried else 0.0
        return past + scale * inside @ v

    return {
        "no_mask": (
            lambda: out(scores),
            "a token reads keys later in its own chunk: mask the "
            "chunk's scores to j ≤ i (torch.tril) before multiplying "
            "by V.",
        ),
        "mask_strict": (
            lambda: out(scores.tril(-1)),
            "a token does not read its own key: the mask inside the "
            "chunk keeps the diagonal, j ≤ i (tril(), not tril(-1)).",
        ),
        "mask_transposed": (
            lambda: out(scores.triu()),
            "the mask is transposed: a token reads keys j ≥ i. Keep "
            "the lower triangle, tril().",
        ),
        "no_state": (
            lambda: out(scores.tril(), carried=False),
            "the outputs ignore the state carried in from earlier "
            "chunks: add s Q S to the part from inside the chunk.",
        ),
        "no_scale": (
            lambda: out(scores.tril(), scale=1.0),
            "the output is √d_k too large: scale q by 1/√d_k, in both terms.",
        ),
    }


def chunk_state_mistakes(k, v, state) -> dict:
    """The usual mistakes in the state a chunk hands on: S + Kᵀ V."""
    return {
        "state_not_carried": (
            lambda: k.transpose(-1, -2) @ v,
            "the new state forgets the old one: it is the state "
            "carried in plus this chunk's Kᵀ V.",
        ),
        "state_unchanged": (
            lambda: state,
            "the state is handed on unchanged: add this chunk's Kᵀ V.",
        ),
    }


def multi_head_mistakes(x, w_q, w_k, w_v, w_o, n_heads: int) -> dict:
    """The usual mistakes in causal multi-head attention, Y = [O_1 … O_H] W_O
    with O_h = softmax(Q_h K_hᵀ / √d_h + log M) V_h (x ``[B, T, d]``)."""
    b, t, d = x.shape

    def split(y, heads):
        """The package's cut: [B, T, H·D] -> [B, H, T, D]."""
        return y.view(b, t, heads, d // heads).transpose(1, 2)

    def interleaved(y, heads):
        """D and H swapped: head h takes every H-th feature."""
        return y.view(b, t, d // heads, heads).permute(0, 3, 1, 2)

    def merge(o):
        return o.transpose(1, 2).reshape(b, t, d)

    def mha(cut=split, heads=n_heads, scale=None, causal=True, w_out=w_o):
        q, k, v = (cut(x @ w, heads) for w in (w_q, w_k, w_v))
        s = (1 / math.sqrt(q.shape[-1])) if scale is None else scale
        o = sdpa(q, k, v, scale=s, causal=causal)
        # merge back: the interleaved cut's inverse, or the package's
        if cut is interleaved:
            o = o.permute(0, 2, 3, 1).reshape(b, t, d)
        else:
            o = merge(o)
        return o if w_out is None else o @ w_out

    return {
        "one_head": (
            lambda: mha(heads=1),
            "your layer behaves as one wide head: cut Q, K and V into "
            "H heads of d_h = d / H features each and attend in each.",
        ),
        "scale_d_model": (
            lambda: mha(scale=1 / math.sqrt(d)),
            "the scores are scaled by 1/√d_model: each head scales "
            "by 1/√d_h, its own width.",
        ),
        "no_output_projection": (
            lambda: mha(w_out=None),
            "the heads are concatenated but not mixed: multiply "
            "the concatenation by W_O.",
        ),
        "interleaved_heads": (
            lambda: mha(cut=interleaved),
            "the heads take the wrong features: head h is the "
            "h-th block of d_h consecutive columns, "
            "x.view(B, T, H, d_h), not every H-th column.",
        ),
        "not_causal": (
            lambda: mha(causal=False),
            "future tokens change the output: each head needs the "
            "causal mask.",
        ),
    }


def delta_chunk(q, k, v, beta, state, *, mistake: str | None = None):
    """One chunk of the delta rule in the WY / UT form, with ``mistake``
    naming one common error: (o ``[B, H, C, Dv]``, new state)."""
    s = 1.0 if mistake == "no_scale" else 1 / math.sqrt(q.shape[-1])
    q = s * q
    b = beta[..., None]  # [B, H, C, 1]
    eye = torch.eye(k.shape[2], dtype=k.dtype)
    gram = k @ k.transpose(-1, -2)
    if mistake != "l_without_beta":
        gram = b * gram
    lower = eye + gram.tril(0 if mistake == "l_with_diagonal" else -1)
    w = torch.linalg.solve(lower, b * k)
    u = torch.linalg.solve(lower, b * v)
    if mistake == "additive_chunk":
        v_new = v
    elif mistake == "values_ignore_state":
        v_new = u
    else:
        v_new = u - w @ state
    scores = q @ k.transpose(-1, -2)
    inside = {"mask_strict": scores.tril(-1), "no_mask": scores}.get(
        mistake, scores.tril()
    )
    o = q @ state + inside @ v_new
    written = v if mistake == "state_from_v" else v_new
    new = (
        state
        if mistake == "state_unchanged"
        else (state + k.transpose(-1, -2) @ written)
    )
    return o, new


DELTA_CHUNK_MISTAKES = {
    "additive_chunk": "your chunk writes Kᵀ V as linear attention does: the delta rule writes "
    "the corrected values V_new = U − W S (the UT transform of β ⊙ V and β ⊙ K).",
    "values_ignore_state": "the chunk's values do not see the state carried in: "
    "V_new = U − W S, not U (matches only from an empty state).",
    "l_with_diagonal": "L has β k_i·k_i on its diagonal: L = I + StrictTril(diag(β) K Kᵀ), "
    "the strictly lower part (tril(-1)).",
    "l_without_beta": "β is missing inside L: L = I + StrictTril(diag(β) K Kᵀ).",
    "no_scale": "the output is √d_k too large: scale q by 1/√d_k.",
    "mask_strict": "a token does not read its own key: the mask inside the chunk keeps the "
    "diagonal, j ≤ i (tril(), not tril(-1)).",
    "no_mask": "a token reads keys later in its own chunk: mask Q Kᵀ to j ≤ i (tril()) "
    "before multiplying by V_new.",
    "state_from_v": "the outputs match but the new state adds Kᵀ V: it adds the corrected "
    "values, S + Kᵀ V_new.",
    "state_unchanged": "the outputs match but the state is handed on unchanged: "
    "S + Kᵀ V_new.",
}


def delta_chunk_mistakes(q, k, v, beta, state, part: int) -> dict:
    """Each mistake's output (``part`` 0) or new state (``part`` 1)."""
    names = (
        (
            "additive_chunk",
            "values_ignore_state",
            "l_with_diagonal",
            "l_without_beta",
            "no_scale",
            "mask_strict",
            "no_mask",
        )
        if part == 0
        else ("state_from_v", "state_unchanged")
    )
    return {
        m: (
            lambda m=m: delta_chunk(q, k, v, beta, state, mistake=m)[part],
            DELTA_CHUNK_MISTAKES[m],
        )
        for m in names
    }

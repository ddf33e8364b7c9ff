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
from .i18n import tr


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


def max_wrong_axis(q, k, v, *, scale, causal):
    """The max trick with each column's maximum: exp(s_ij − max_i s_ij), normalised per row."""
    scores = scale * q @ k.transpose(-2, -1)
    if causal:
        allowed = attention.causal_mask(q.shape[2], k.shape[2])
        scores = scores.masked_fill(~allowed, float("-inf"))
    e = (scores - scores.amax(dim=-2, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True) @ v


def mask_after_renormalised(q, k, v, *, scale):
    """softmax over every key, then the future zeroed and each row renormalised: right on
    paper, but the allowed weights underflow to 0 when a future score is far larger."""
    weights = torch.softmax(scale * q @ k.transpose(-2, -1), dim=-1)
    weights = weights * attention.causal_mask(q.shape[2], k.shape[2])
    return weights / weights.sum(dim=-1, keepdim=True) @ v


def attention_mistakes(q, k, v, causal: bool) -> dict:
    d = q.shape[-1]
    s = 1 / math.sqrt(d)
    flip = [2]
    mistakes = {
        "scale_dv": (
            lambda: sdpa(q, k, v, scale=v.shape[-1] ** -0.5, causal=causal),
            tr("scaled by 1/√D_v, the width of the values: the scale is 1/√d_k, "
               "the width of the queries and keys (q.shape[-1])."),
        ),
        "max_wrong_axis": (
            lambda: max_wrong_axis(q, k, v, scale=s, causal=causal),
            tr("the maximum you subtract is not each row's own: the softmax is "
               "unchanged only when one number is taken from a whole row of "
               "scores. Use scores.amax(dim=-1, keepdim=True)."),
        ),
        "no_scale": (
            lambda: sdpa(q, k, v, scale=1.0, causal=causal),
            tr("off by a factor √d_k inside the softmax: is the scale 1/√d_k applied?"),
        ),
        "scale_1_over_d": (
            lambda: sdpa(q, k, v, scale=1 / d, causal=causal),
            tr("scaled by 1/d_k instead of 1/√d_k."),
        ),
        "softmax_axis": (
            lambda: sdpa(q, k, v, scale=s, causal=causal, axis=-2),
            tr("the weights of a query do not sum to 1: did you softmax over the wrong "
               "axis? Normalise each query's row of scores (dim=-1)."),
        ),
        "no_softmax": (
            lambda: s * q @ k.transpose(-2, -1) @ v,
            tr("the output is the raw scores times V: apply the softmax to the scores."),
        ),
    }
    if causal:
        mistakes |= {
            "mask_missing": (
                lambda: sdpa(q, k, v, scale=s, causal=False),
                tr("future tokens change the output: the causal mask is missing."),
            ),
            "mask_transposed": (
                lambda: sdpa(
                    q.flip(flip),
                    k.flip(flip),
                    v.flip(flip),
                    scale=s,
                    causal=True,
                ).flip(flip),
                tr("future tokens change the output: the mask is transposed (token i must see "
                   "keys j ≤ i, the lower triangle, torch.tril)."),
            ),
            "mask_after_softmax": (
                lambda: sdpa(q, k, v, scale=s, causal=True, mask_after=True),
                tr("the weights of a query do not sum to 1: mask the scores with -inf before the "
                   "softmax, not the weights after it."),
            ),
            "mask_after_renormalised": (
                lambda: mask_after_renormalised(q, k, v, scale=s),
                tr("you mask after the softmax and renormalise: right on paper, "
                   "but the softmax ran over the future scores too, and where a "
                   "future score is far larger than every allowed one, the "
                   "allowed weights underflow to 0 and the renormalisation "
                   "divides 0 by 0. Mask the scores with -inf before the "
                   "softmax."),
            ),
            "mask_with_zero": (
                lambda: sdpa(q, k, v, scale=s, causal=True, fill=0.0),
                tr("future tokens still get weight: a masked score set to 0 becomes exp(0) = 1; "
                   "fill it with -inf."),
            ),
        }
    else:
        mistakes["masked"] = (
            lambda: sdpa(q, k, v, scale=s, causal=True),
            tr("you applied a causal mask; this check wants attention without one "
               "(check_causal_attention tests the masked kind)."),
        )
    return mistakes


def decode_mistakes(q_t, keys, values) -> dict:
    s = 1 / math.sqrt(q_t.shape[-1])
    return {
        "scale_dv": (
            lambda: sdpa(
                q_t,
                keys,
                values,
                scale=values.shape[-1] ** -0.5,
                causal=False,
            ),
            tr("scaled by 1/√D_v, the width of the values: the scale is 1/√d_k, "
               "the width of the queries and keys (q_t.shape[-1])."),
        ),
        "no_scale": (
            lambda: sdpa(q_t, keys, values, scale=1.0, causal=False),
            tr("off by a factor √d_k inside the softmax: is the scale applied?"),
        ),
        "square_mask": (
            lambda: values[:, :, :1],
            tr("the step attends only to the first token: a causal mask built for a "
               "square matrix keeps only key 1 of a 1 × t row. No mask is needed: the "
               "cache holds only the past and the present."),
        ),
        "attend_before_append": (
            lambda: sdpa(
                q_t, keys[:, :, :-1], values[:, :, :-1], scale=s, causal=False
            ),
            tr("the new token does not see itself: append (k_t, v_t) to the cache before "
               "computing the scores."),
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
        m: (lambda m=m: output(m), tr(STEP_MISTAKES[m]))
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
            tr("you normalise after adding (post-norm, the 2017 layout): "
               "normalise the input of each branch, x + Mixer(RMSNorm(x)), "
               "and leave the sum itself unnormalised."),
        ),
        "no_mixer_residual": (
            no_mixer_residual,
            tr("the attention branch replaces x instead of adding to "
               "it: x ← x + Mixer(RMSNorm(x)) keeps the stream."),
        ),
        "no_mlp_residual": (
            no_mlp_residual,
            tr("the MLP branch replaces the stream instead of adding to "
               "it: x ← x + MLP(RMSNorm(x))."),
        ),
        "normed_residual": (
            normed_residual,
            tr("you add the branch to the normalised x: the residual must "
               "carry x itself, x + Mixer(RMSNorm(x))."),
        ),
        "parallel": (
            parallel,
            tr("the MLP reads the block's input, not the stream after "
               "attention (that is the parallel block of GPT-J and PaLM): "
               "add the mixer's output first, then run the MLP on the sum."),
        ),
        "norms_swapped": (
            norms_swapped,
            tr("the two norms are swapped: mixer_norm goes before the "
               "mixer, mlp_norm before the MLP (each has its own gain)."),
        ),
        "mlp_first": (
            mlp_first,
            tr("the MLP runs before the mixer: attention comes first in "
               "the block, then the MLP."),
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
            tr("a token reads keys later in its own chunk: mask the "
               "chunk's scores to j ≤ i (torch.tril) before multiplying "
               "by V."),
        ),
        "mask_strict": (
            lambda: out(scores.tril(-1)),
            tr("a token does not read its own key: the mask inside the "
               "chunk keeps the diagonal, j ≤ i (tril(), not tril(-1))."),
        ),
        "mask_transposed": (
            lambda: out(scores.triu()),
            tr("the mask is transposed: a token reads keys j ≥ i. Keep "
               "the lower triangle, tril()."),
        ),
        "no_state": (
            lambda: out(scores.tril(), carried=False),
            tr("the outputs ignore the state carried in from earlier "
               "chunks: add s Q S to the part from inside the chunk."),
        ),
        "no_scale": (
            lambda: out(scores.tril(), scale=1.0),
            tr("the output is √d_k too large: scale q by 1/√d_k, in both terms."),
        ),
    }


def chunk_state_mistakes(k, v, state) -> dict:
    """The usual mistakes in the state a chunk hands on: S + Kᵀ V."""
    return {
        "state_not_carried": (
            lambda: k.transpose(-1, -2) @ v,
            tr("the new state forgets the old one: it is the state "
               "carried in plus this chunk's Kᵀ V."),
        ),
        "state_unchanged": (
            lambda: state,
            tr("the state is handed on unchanged: add this chunk's Kᵀ V."),
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

    def by_reshape(y, heads):
        """A plain reshape to [B, H, T, D]: rows of different tokens end up in one head."""
        return y.reshape(b, heads, t, d // heads)

    def merge(o):
        return o.transpose(1, 2).reshape(b, t, d)

    def merge_by_reshape(o):
        """[B, H, T, D] reshaped to [B, T, H·D] without moving H back next to D."""
        return o.reshape(b, t, d)

    def mha(
        cut=split,
        heads=n_heads,
        scale=None,
        causal=True,
        w_out=w_o,
        glue_heads=merge,
    ):
        q, k, v = (cut(x @ w, heads) for w in (w_q, w_k, w_v))
        s = (1 / math.sqrt(q.shape[-1])) if scale is None else scale
        o = sdpa(q, k, v, scale=s, causal=causal)
        # merge back: the interleaved cut's inverse, or the package's
        if cut is interleaved:
            o = o.permute(0, 2, 3, 1).reshape(b, t, d)
        else:
            o = glue_heads(o)
        return o if w_out is None else o @ w_out

    return {
        "one_head": (
            lambda: mha(heads=1),
            tr("your layer behaves as one wide head: cut Q, K and V into "
               "H heads of d_h = d / H features each and attend in each."),
        ),
        "scale_d_model": (
            lambda: mha(scale=1 / math.sqrt(d)),
            tr("the scores are scaled by 1/√d_model: each head scales "
               "by 1/√d_h, its own width."),
        ),
        "no_output_projection": (
            lambda: mha(w_out=None),
            tr("the heads are concatenated but not mixed: multiply "
               "the concatenation by W_O."),
        ),
        "interleaved_heads": (
            lambda: mha(cut=interleaved),
            tr("the heads take the wrong features: head h is the "
               "h-th block of d_h consecutive columns, "
               "x.view(B, T, H, d_h), not every H-th column."),
        ),
        "merge_without_transpose": (
            lambda: mha(glue_heads=merge_by_reshape),
            tr("the heads are merged with a plain reshape of [B, H, T, d_h] "
               "to [B, T, d], which mixes the rows of different tokens: move "
               "the head axis back next to d_h first, "
               "o.transpose(1, 2).reshape(B, T, d) (merge_heads)."),
        ),
        "split_by_reshape": (
            lambda: mha(cut=by_reshape),
            tr("the heads are cut with a plain reshape of [B, T, d] to "
               "[B, H, T, d_h], which puts the features of different tokens "
               "into one head: view as [B, T, H, d_h], then "
               ".transpose(1, 2) (split_heads)."),
        ),
        "not_causal": (
            lambda: mha(causal=False),
            tr("future tokens change the output: each head needs the "
               "causal mask."),
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
            tr(DELTA_CHUNK_MISTAKES[m]),
        )
        for m in names
    }


def gated_delta_chunk(q, k, v, g, beta, state, *, mistake: str | None = None):
    """One chunk of the gated delta rule in the decay-weighted WY / UT form
    (Lesson 12), with ``mistake`` naming one common error: (o, new state).
    g, beta ``[B, H, C]``; b_i = g_1 + … + g_i; Γ_ij = e^(b_i − b_j)."""
    s = 1.0 if mistake == "no_scale" else 1 / math.sqrt(q.shape[-1])
    q = s * q
    size = k.shape[2]
    b = g.cumsum(dim=-1)  # b_i = g_1 + … + g_i
    if mistake == "decay_off_by_one":
        b = b - g  # the gates up to i − 1 only
    log_gamma = b[..., :, None] - b[..., None, :]  # b_i − b_j
    if mistake == "decay_includes_start":
        log_gamma = log_gamma + g[..., None, :]  # α_j as well: over [j, i]
    causal = torch.ones(size, size, dtype=torch.bool).tril()
    gamma = log_gamma.masked_fill(~causal, -math.inf).exp()
    if mistake == "no_decay_inside":
        gamma = causal.to(q.dtype)
    decay = b.exp()[..., None]  # e^(b_i)  [B, H, C, 1]
    bt = beta[..., None]
    lower = torch.eye(size, dtype=k.dtype) + (
        bt * (k @ k.transpose(-1, -2)) * gamma
    ).tril(-1)
    keys = k if mistake == "keys_not_decayed" else decay * k
    w = torch.linalg.solve(lower, bt * keys)
    u = torch.linalg.solve(lower, bt * v)
    v_new = u - w @ state
    reads = q if mistake == "queries_not_decayed" else decay * q
    o = reads @ state + (q @ k.transpose(-1, -2) * gamma) @ v_new
    to_end = (
        k
        if mistake == "keys_to_end_not_decayed"
        else gamma[..., -1, :, None] * k
    )
    carried = (
        state
        if mistake == "state_not_decayed"
        else decay[..., -1:, :] * state
    )
    return o, carried + to_end.transpose(-1, -2) @ v_new


GATED_DELTA_CHUNK_MISTAKES = {
    "decay_off_by_one": "the decays stop one token early: b_i sums the gates up to and "
    "including token i (b = g.cumsum), since token i decays the state before it writes, "
    "not only up to i − 1.",
    "decay_includes_start": "the decay from j to i includes α_j: Γ_ij = e^(b_i − b_j) runs "
    "over (j, i], because token j writes after its own decay (the Kimi Linear report's "
    "γ over [j, i] is an index erratum).",
    "no_decay_inside": "the chunk's scores and L carry no decay: multiply Q Kᵀ and K Kᵀ by "
    "Γ_ij = e^(b_i − b_j), the decay between the two tokens.",
    "keys_not_decayed": "W misses the decay of the state the keys read: "
    "W = L⁻¹ diag(β) (K ⊙ e^b), not L⁻¹ diag(β) K.",
    "queries_not_decayed": "the outputs read the carried state undecayed: "
    "O = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ) (U − W S).",
    "no_scale": "the output is √d_k too large: scale q by 1/√d_k.",
    "state_not_decayed": "the outputs match but the carried state is not decayed: "
    "S_new = e^(b_C) S + (K ⊙ e^(b_C − b))ᵀ (U − W S).",
    "keys_to_end_not_decayed": "the outputs match but each write reaches the chunk's end "
    "undecayed: use (K ⊙ e^(b_C − b))ᵀ (U − W S), the last row of Γ.",
}


def gated_delta_chunk_mistakes(q, k, v, g, beta, state, part: int) -> dict:
    """Each gated-chunk mistake's output (``part`` 0) or new state (1)."""
    names = (
        (
            "decay_off_by_one",
            "decay_includes_start",
            "no_decay_inside",
            "keys_not_decayed",
            "queries_not_decayed",
            "no_scale",
        )
        if part == 0
        else ("state_not_decayed", "keys_to_end_not_decayed")
    )
    return {
        m: (
            lambda m=m: gated_delta_chunk(q, k, v, g, beta, state, mistake=m)[
                part
            ],
            tr(GATED_DELTA_CHUNK_MISTAKES[m]),
        )
        for m in names
    }

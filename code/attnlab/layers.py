"""The recurrent mixer layers: linear attention, GLA, DeltaNet, Gated DeltaNet and KDA.

All five share one shape (written once, in :class:`RecurrentMixerLayer`)::

    q, k, v = ShortConv(x W_q), ShortConv(x W_k), ShortConv(x W_v)      (per head)
    q, k, v = feature_map(q, k, v)                                     (per layer kind)
    o, S    = kernel(q, k, v, gates from x, initial state S_0)          (chunkwise or one step)
    y       = merge_heads(output_gate(x) ⊙ RMSNorm_head(o)) W_o         (norm, gate optional)

and differ only in the feature map, the kernel, the gates they read from x and the output gate.
Names agree across the five: ``qkv`` (projections and short convolutions), ``beta_proj`` (β of
the delta family), ``decay_proj`` (the raw decay, always a decay), ``A_log``/``dt_bias`` (the
Mamba-2 decay parameters), ``norm`` (the per-head output RMSNorm), ``g_proj`` (the output gate,
always an output gate) and ``out`` (W_o). ``log_gate(x)`` returns the log-space decay g ≤ 0.

Every layer maps x ``[B, T, d_model]`` (T ≥ 1) to ``(y [B, T, d_model], RecurrentCache or
None)``. The cache holds the state ``S [B, H, head_dim, head_dim]`` (read as o = Sᵀ q), the three
convolution inputs and, for normalised linear attention, the key sum z; its size does not depend
on T, and passing it back with the next tokens continues the sequence exactly. Prefill uses the
chunkwise kernel, a one-token step the recurrent one.

Upstream parity (FLA's layers, ``fla/layers``): the output RMSNorm uses ``norm_eps = 1e-5``
(:data:`attnlab.blocks.LAYER_NORM_EPS`, FLA's default in ``KimiDeltaAttention``,
``GatedDeltaNet``, ``DeltaNet`` and ``GatedLinearAttention``); GLA's output is RMSNorm × swish
gate (``g_proj`` without bias) as in FLA's default; q, k, v pass through SiLU after the short
convolution, as FLA's ``ShortConvolution(activation="silu")`` does. Kept different on purpose:
the Gated DeltaNet output gate is a sigmoid, not FLA's swish (see :class:`GatedDeltaNetLayer`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import merge_heads, split_heads
from .blocks import LAYER_NORM_EPS, ConvQKV, HeadRMSNorm, RecurrentCache
from .checks import (
    check_choice,
    check_layer_input,
    check_positive_int,
    check_tensor,
)
from .delta import (
    delta_rule_chunk,
    delta_rule_recurrent,
    gated_delta_rule_chunk,
    gated_delta_rule_recurrent,
)
from .gated import (
    GLA_GATE_NORMALIZER,
    gla_chunk,
    gla_recurrent,
    init_softplus_decay,
    retnet_decay,
    softplus_decay_gate,
)
from .kda import kda_chunk, kda_step
from .linear import (
    FEATURE_MAPS,
    linear_attention_chunk,
    linear_attention_recurrent,
)

GLA_DECAYS = ("channel", "scalar", "fixed")
"""Decay kinds of :class:`GLALayer`: per channel (GLA), per head (Mamba-2), fixed (RetNet)."""


def check_recurrent_cache(
    cache: object, sizes: dict[str, int]
) -> RecurrentCache | None:
    """Check that ``cache`` is None or a ``RecurrentCache`` whose state is ``[B, H, Dk, Dv]``."""
    if cache is None:
        return None
    if not isinstance(cache, RecurrentCache):
        raise ValueError(
            f"cache: expected a RecurrentCache or None, got {type(cache).__name__}"
        )
    check_tensor("cache.state", cache.state, ("B", "H", "Dk", "Dv"), sizes)
    return cache


def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖, 1e-6) over the last axis (FLA's ``l2norm`` of q and k)."""
    return F.normalize(x, dim=-1, eps=1e-6)


class RecurrentMixerLayer(nn.Module):
    """What every recurrent mixer layer shares: the input side, the cache and the output side.

    Builds, in this order, ``qkv`` (:class:`attnlab.blocks.ConvQKV`), ``beta_proj`` when
    ``beta`` (β = sigmoid(x W_β), one per head and token), ``norm`` (per-head RMSNorm with
    ``norm_eps``) when ``output_norm``, and ``out`` (W_o). A subclass adds its decay and output
    gate after calling this constructor and supplies the hooks:

    - ``feature_map(q, k, v)`` -> (q, k, v): what happens after the short convolution;
    - ``mix(q, k, v, x, state, use_cache)`` -> (o, final state): the kernel call (chunkwise for
      a prefill, the recurrent step for T = 1), gates read from x;
    - ``output_gate(x)`` -> ``[B, H, T, head_dim]`` or None: the gate on the normalised output;
    - ``_state_of(cache)`` / ``_cache_of(final, conv)``: how the kernel's state sits in the cache
      (only normalised linear attention, with its key sum z, overrides them).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
        beta: bool = False,
        output_norm: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.n_heads = check_positive_int("n_heads", n_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        if (
            isinstance(norm_eps, bool)
            or not isinstance(norm_eps, int | float)
            or norm_eps <= 0
        ):
            raise ValueError(
                f"norm_eps: expected a number > 0, got {norm_eps!r}"
            )
        self.qkv = ConvQKV(d_model, n_heads, head_dim, conv_size)
        self.beta_proj = (
            nn.Linear(d_model, n_heads, bias=False) if beta else None
        )
        self.norm = (
            HeadRMSNorm(head_dim, eps=norm_eps) if output_norm else None
        )
        self.out = nn.Linear(n_heads * head_dim, d_model, bias=False)

    # ------------------------------------------------------------------ hooks
    def feature_map(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v ``[B, H, T, head_dim]`` after the short convolution -> the kernel's inputs."""
        return q, k, v

    def mix(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        x: torch.Tensor,
        state: object,
        use_cache: bool,
    ) -> tuple[torch.Tensor, object]:
        """Run the kernel on q, k, v ``[B, H, T, D]`` (x gives the gates) from ``state``;
        return ``(o [B, H, T, D], final state or None)``."""
        raise NotImplementedError

    def output_gate(self, x: torch.Tensor) -> torch.Tensor | None:
        """The gate multiplying the normalised output, ``[B, H, T, D]``, or None (no gate)."""
        return None

    def _state_of(self, cache: RecurrentCache | None) -> object:
        """The kernel's initial state held by ``cache`` (None for a fresh sequence)."""
        return None if cache is None else cache.state

    def _cache_of(
        self, final: object, conv: tuple[torch.Tensor, ...]
    ) -> RecurrentCache:
        """The cache that continues the sequence from the kernel's final state."""
        return RecurrentCache(state=final, conv=conv)

    # ------------------------------------------------------------------ the plumbing, once
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """Mix x over time; pass the returned cache back with the next tokens
        to continue."""
        b, t = check_layer_input(x, self.d_model, self.out.weight)
        sizes = dict(
            B=b, T=t, H=self.n_heads, Dk=self.head_dim, Dv=self.head_dim
        )
        cache = check_recurrent_cache(cache, sizes)
        q, k, v, conv = self.qkv(x, cache.conv if cache is not None else ())
        q, k, v = self.feature_map(q, k, v)
        o, final = self.mix(q, k, v, x, self._state_of(cache), use_cache)
        if self.norm is not None:
            o = self.norm(o)
        gate = self.output_gate(x)
        if gate is not None:
            o = gate * o
        y = self.out(merge_heads(o))
        return y, (self._cache_of(final, conv) if use_cache else None)


class LinearAttentionLayer(RecurrentMixerLayer):
    """A linear-attention mixer layer (Katharopoulos et al. 2020, with a short convolution):

        o = linear_attention(φ(q), φ(k), v)                                 φ = feature map
        y = merge_heads(o) W_o                    if normalize (the normaliser bounds o)
        y = merge_heads(RMSNorm(o)) W_o           otherwise (the state grows like t; the
                                                  per-head RMSNorm keeps o at unit scale)

    When normalised, the cache also holds the key sum ``z [B, H, head_dim]``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        feature_map: str = "elu+1",
        normalize: bool = True,
        conv_size: int = 4,
        *,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        phi = FEATURE_MAPS[
            check_choice("feature_map", feature_map, FEATURE_MAPS)
        ]
        if not isinstance(normalize, bool):
            raise ValueError(
                f"normalize: expected True or False, got {normalize!r}"
            )
        super().__init__(
            d_model,
            n_heads,
            head_dim,
            conv_size=conv_size,
            norm_eps=norm_eps,
            output_norm=not normalize,
        )
        self.phi = phi
        self.normalize = normalize

    def feature_map(self, q, k, v):
        return self.phi(q), self.phi(k), v

    def _state_of(self, cache):
        if cache is None or not self.normalize:
            return super()._state_of(cache)
        if cache.normaliser is None:
            raise ValueError(
                "cache.normaliser: expected z [B, H, Dk] (normalize=True), got None"
            )
        return cache.state, cache.normaliser

    def _cache_of(self, final, conv):
        state, z = final if self.normalize else (final, None)
        return RecurrentCache(state=state, conv=conv, normaliser=z)

    def mix(self, q, k, v, x, state, use_cache):
        kernel = (
            linear_attention_recurrent
            if q.shape[2] == 1
            else linear_attention_chunk
        )
        return kernel(
            q,
            k,
            v,
            normalize=self.normalize,
            initial_state=state,
            output_final_state=use_cache,
        )


class GLALayer(RecurrentMixerLayer):
    """A gated linear-attention mixer layer (FLA's ``GatedLinearAttention`` default output):

        q, k, v = SiLU(q), SiLU(k), SiLU(v)                    (after the short convolution)
        o = gla(q, k, v, g)
        y = merge_heads(SiLU(x W_g) ⊙ RMSNorm_head(o)) W_o     (RMSNorm × swish gate)

    with the log-decay g chosen by ``decay``:

    - ``"channel"`` (GLA): ``g = logsigmoid(x W_1 W_2 + b) / 16`` ``[B, H, T, Dk]``,
      ``W_1`` of rank ``decay_rank``;
    - ``"scalar"`` (Mamba-2): ``g = softplus_decay_gate(x w, A_log, dt_bias)`` ``[B, H, T]``;
    - ``"fixed"`` (RetNet): ``g = log γ_h`` per head, not learned.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        decay: str = "channel",
        conv_size: int = 4,
        decay_rank: int = 16,
        *,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        check_choice("decay", decay, GLA_DECAYS)
        super().__init__(
            d_model, n_heads, head_dim, conv_size=conv_size, norm_eps=norm_eps
        )
        self.decay = decay
        if decay == "channel":
            self.decay_proj = nn.Sequential(
                nn.Linear(
                    d_model,
                    check_positive_int("decay_rank", decay_rank),
                    bias=False,
                ),
                nn.Linear(decay_rank, n_heads * head_dim),
            )
        elif decay == "scalar":
            # dt_bias is the bias
            self.decay_proj = nn.Linear(d_model, n_heads, bias=False)
            a_log, dt_bias = init_softplus_decay(n_heads, n_heads)
            self.A_log, self.dt_bias = (
                nn.Parameter(a_log),
                nn.Parameter(dt_bias),
            )
        else:
            self.register_buffer(
                "log_gamma", retnet_decay(n_heads), persistent=False
            )
        self.g_proj = nn.Linear(d_model, n_heads * head_dim, bias=False)

    def log_gate(self, x: torch.Tensor) -> torch.Tensor:
        """g for input x ``[B, T, d_model]``: ``[B, H, T, Dk]`` (channel) or ``[B, H, T]``."""
        if self.decay == "channel":
            return split_heads(
                F.logsigmoid(self.decay_proj(x)) / GLA_GATE_NORMALIZER,
                self.n_heads,
            )
        if self.decay == "scalar":
            return softplus_decay_gate(
                self.decay_proj(x), self.A_log, self.dt_bias
            ).transpose(1, 2)
        b, t, _ = x.shape
        return self.log_gamma[None, :, None].expand(b, self.n_heads, t)

    def feature_map(self, q, k, v):
        return F.silu(q), F.silu(k), F.silu(v)

    def mix(self, q, k, v, x, state, use_cache):
        kernel = gla_recurrent if q.shape[2] == 1 else gla_chunk
        return kernel(
            q,
            k,
            v,
            g=self.log_gate(x),
            initial_state=state,
            output_final_state=use_cache,
        )

    def output_gate(self, x):
        return F.silu(split_heads(self.g_proj(x), self.n_heads))


class DeltaLayer(RecurrentMixerLayer):
    """What DeltaNet, Gated DeltaNet and KDA add to the shared layer (the Notation appendix, §4–§6):

        q, k = L2Norm(SiLU(q)), L2Norm(SiLU(k))     v = SiLU(v)        (after the convolution)
        β = sigmoid(x W_β), one per head and token

    and a per-head RMSNorm on the output. Subclasses give the kernel call and the gates.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        conv_size: int = 4,
        *,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__(
            d_model,
            n_heads,
            head_dim,
            conv_size=conv_size,
            norm_eps=norm_eps,
            beta=True,
        )

    def feature_map(self, q, k, v):
        return l2_normalise(F.silu(q)), l2_normalise(F.silu(k)), F.silu(v)

    def beta(self, x: torch.Tensor) -> torch.Tensor:
        """β = sigmoid(x W_β): x ``[B, T, d_model]`` -> ``[B, H, T]`` in (0, 1)."""
        return torch.sigmoid(self.beta_proj(x)).transpose(1, 2)


class DeltaNetLayer(DeltaLayer):
    """DeltaNet (the Notation appendix, §4): the delta rule, no decay and no output gate (as FLA).

    y = merge_heads(RMSNorm_head(delta_rule(q, k, v, β))) W_o
    """

    def mix(self, q, k, v, x, state, use_cache):
        kernel = delta_rule_recurrent if q.shape[2] == 1 else delta_rule_chunk
        return kernel(
            q,
            k,
            v,
            beta=self.beta(x),
            initial_state=state,
            output_final_state=use_cache,
        )


class GatedDeltaNetLayer(DeltaLayer):
    """Gated DeltaNet (the Notation appendix, §5): the delta rule with a
    scalar decay per head.

        g = −exp(A_log) · softplus(x W_a + dt_bias)             [B, H, T]
        y = merge_heads(sigmoid(x W_g)
                        ⊙ RMSNorm_head(gated_delta_rule(q, k, v, g, β))) W_o

    Output gate: a sigmoid, not the swish of FLA's GDN layer, because Kimi
    Linear found sigmoid better (KL Table 1) and used it for its GDN-H
    baseline (KL §5.2); GDN and KDA then differ only in the decay.
    A = exp(A_log) ~ U(1, 16) and softplus(dt_bias) log-uniform in
    [1e-3, 1e-1] (``init_softplus_decay``): at x = 0 the decay α = exp(−A·Δ)
    is in [0.2, 0.999], mostly close to 1, so the layer starts out
    remembering.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        conv_size: int = 4,
        *,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__(
            d_model, n_heads, head_dim, conv_size, norm_eps=norm_eps
        )
        self.decay_proj = nn.Linear(d_model, n_heads, bias=False)
        a_log, dt_bias = init_softplus_decay(n_heads, n_heads)
        self.A_log, self.dt_bias = nn.Parameter(a_log), nn.Parameter(dt_bias)
        self.g_proj = nn.Linear(d_model, n_heads * head_dim, bias=False)

    def log_gate(self, x: torch.Tensor) -> torch.Tensor:
        """g = −exp(A_log) · softplus(x W_a + dt_bias): x ``[B, T, d_model]``
        -> ``[B, H, T]``."""
        return softplus_decay_gate(
            self.decay_proj(x), self.A_log, self.dt_bias
        ).transpose(1, 2)

    def mix(self, q, k, v, x, state, use_cache):
        kernel = (
            gated_delta_rule_recurrent
            if q.shape[2] == 1
            else gated_delta_rule_chunk
        )
        # before g: autograd then sums x's gradients in a fixed order
        beta = self.beta(x)
        return kernel(
            q,
            k,
            v,
            g=self.log_gate(x),
            beta=beta,
            initial_state=state,
            output_final_state=use_cache,
        )

    def output_gate(self, x):
        return torch.sigmoid(split_heads(self.g_proj(x), self.n_heads))


class KDALayer(DeltaLayer):
    """The KDA layer of Kimi Linear (KL §4, eq. 10; the Notation appendix, §6):

        g = −exp(A_log) ⊙ softplus(x W↓_α W↑_α + dt_bias)    [B, H, T, Dk], rank head_dim
        y = merge_heads(sigmoid(x W↓_g W↑_g) ⊙ RMSNorm_head(kda(q, k, v, g, β))) W_o

    Both gates are low-rank with rank head_dim (FLA's ``f_proj`` and ``g_proj``; here
    ``decay_proj`` and ``g_proj``), and the output gate is a sigmoid (KL Table 1: better than no
    gate and than swish). A = exp(A_log) ~ U(1, 16) per head, and softplus(dt_bias) is
    log-uniform in [1e-3, 1e-1] per channel (``init_softplus_decay``): at x = 0 the decay
    α = exp(−A·Δ) lies in [0.2, 0.999], mostly close to 1, so the layer starts out remembering
    and a few channels forget fast. Prefill uses :func:`kda_chunk`; a one-token step
    :func:`kda_step`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        conv_size: int = 4,
        *,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__(
            d_model, n_heads, head_dim, conv_size, norm_eps=norm_eps
        )
        width = n_heads * head_dim
        self.decay_proj = nn.Sequential(
            nn.Linear(d_model, head_dim, bias=False),
            nn.Linear(head_dim, width, bias=False),
        )
        a_log, dt_bias = init_softplus_decay(n_heads, width)
        self.A_log, self.dt_bias = nn.Parameter(a_log), nn.Parameter(dt_bias)
        self.g_proj = nn.Sequential(
            nn.Linear(d_model, head_dim, bias=False),
            nn.Linear(head_dim, width, bias=True),
        )

    def log_gate(self, x: torch.Tensor) -> torch.Tensor:
        """g = −exp(A_log) ⊙ softplus(x W↓ W↑ + dt_bias): x [B, T, d_model] ->
        g [B, H, T, Dk]."""
        b, t, _ = x.shape
        raw = self.decay_proj(x).view(b, t, self.n_heads, self.head_dim)
        dt_bias = self.dt_bias.view(self.n_heads, self.head_dim)
        return softplus_decay_gate(
            raw, self.A_log[:, None], dt_bias
        ).transpose(1, 2)

    def mix(self, q, k, v, x, state, use_cache):
        beta = self.beta(x)  # before g, as in GatedDeltaNetLayer
        g = self.log_gate(x)
        if q.shape[2] > 1:
            return kda_chunk(
                q,
                k,
                v,
                g=g,
                beta=beta,
                initial_state=state,
                output_final_state=use_cache,
            )
        if state is None:
            state = q.new_zeros(*q.shape[:2], self.head_dim, self.head_dim)
        o, state = kda_step(
            q[:, :, 0],
            k[:, :, 0],
            v[:, :, 0],
            g=g[:, :, 0],
            beta=beta[:, :, 0],
            state=state,
        )
        return o.unsqueeze(2), state

    def output_gate(self, x):
        return torch.sigmoid(split_heads(self.g_proj(x), self.n_heads))


RECURRENT_LAYERS: dict[str, type[RecurrentMixerLayer]] = {
    "kda": KDALayer,
    "gdn": GatedDeltaNetLayer,
    "deltanet": DeltaNetLayer,
    "gla": GLALayer,
    "linear": LinearAttentionLayer,
}
"""The layer class of every recurrent kind of :data:`attnlab.configs.RECURRENT_KINDS`."""

"""The recurrent mixer layers: linear attention, GLA, DeltaNet, Gated DeltaNet and KDA.

Each layer is one class whose ``forward`` reads top to bottom, as FLA's ``layers/kda.py`` does:

    q, k, v = ShortConv(x W_q), ShortConv(x W_k), ShortConv(x W_v)   project, convolve, split heads
    q, k, v = feature map (q, k, v)                                  per layer kind
    gates   = β, g from x                                            per layer kind
    o, S    = kernel(q, k, v, gates, S_0)             chunkwise for a prompt, the step for a token
    y       = merge_heads(output gate(x) ⊙ RMSNorm(o)) W_o           norm and gate per layer kind

The classes repeat the lines they share, and each marks with ``### NEW`` what it adds to the
layer it builds on: :class:`GLALayer` and :class:`DeltaNetLayer` to
:class:`LinearAttentionLayer`, :class:`GatedDeltaNetLayer` to DeltaNet, :class:`KDALayer` to
Gated DeltaNet. Names agree across the five:
``q_proj``/``k_proj``/``v_proj`` and ``q_conv``/``k_conv``/``v_conv`` (the input side),
``beta_proj`` (β of the delta family), ``decay_proj`` (the raw decay, always a decay),
``A_log``/``dt_bias`` (the Mamba-2 decay parameters), ``norm`` (the per-head output RMSNorm;
the identity in a KDA layer built with ``output_norm=False``),
``g_proj`` (the output gate, always an output gate) and ``out`` (W_o). ``log_gate(x)`` returns
the log-space decay g ≤ 0.

Every layer maps x ``[B, T, d_model]`` (T ≥ 1) to ``(y [B, T, d_model], RecurrentCache or
None)``. The cache holds what the kernel carries (the state ``S [B, H, head_dim, head_dim]``,
read as o = Sᵀ q, and for normalised linear attention the key sum z) and the three convolution
inputs; its size does not depend on T, and passing it back with the next tokens continues the
sequence exactly. A prompt (or a training batch) runs through the chunkwise kernel; one token
continuing a cache runs through the mechanism's one-token step.

Upstream parity (FLA's layers, ``fla/layers``): the output RMSNorm uses ``norm_eps = 1e-5``
(:data:`attnlab.blocks.LAYER_NORM_EPS`, FLA's default in ``KimiDeltaAttention``,
``GatedDeltaNet``, ``DeltaNet`` and ``GatedLinearAttention``); GLA's output is RMSNorm × swish
gate (``g_proj`` without bias) as in FLA's default; q, k, v pass through SiLU after the short
convolution, as FLA's ``ShortConvolution(activation="silu")`` does. Kept different on purpose:
the Gated DeltaNet output gate is a sigmoid, not FLA's swish (see :class:`GatedDeltaNetLayer`).
The parameters are created in the same order in every layer (input side, β, norm, W_o, then
the decay and the output gate), so a seed gives the same weights as it always has.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import merge_heads, split_heads
from .blocks import (
    LAYER_NORM_EPS,
    RecurrentCache,
    RMSNorm,
    ShortConvolution,
    check_eps,
)
from .checks import (
    check_choice,
    check_finite,
    check_layer_input,
    check_positive_int,
    check_tensor,
    checked,
)
from .delta import (
    delta_rule_chunk,
    delta_rule_step,
    gated_delta_rule_chunk,
    gated_delta_rule_step,
)
from .gated import (
    GLA_GATE_NORMALIZER,
    gla_chunk,
    gla_step,
    init_softplus_decay,
    retnet_decay,
    softplus_decay_gate,
)
from .kda import kda_chunk, kda_step
from .linear import (
    FEATURE_MAPS,
    linear_attention_chunk,
    linear_attention_step,
)

GLA_DECAYS = ("channel", "scalar", "fixed")
"""Decay kinds of :class:`GLALayer`: per channel (GLA), per head (Mamba-2), fixed (RetNet)."""


def _features(x: object) -> None:
    """x: a finite floating-point tensor with at least one axis."""
    if (
        not isinstance(x, torch.Tensor)
        or not x.is_floating_point()
        or not x.dim()
    ):
        got = getattr(x, "dtype", type(x).__name__)
        raise ValueError(
            f"x: expected a floating-point tensor [..., D], got {got}"
        )
    check_finite("x", x)


@checked(_features)
def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖, 1e-6) over the last axis (FLA's ``l2norm`` of q and k)."""
    return F.normalize(x, dim=-1, eps=1e-6)


# --------------------------------------------------------------------------- validation
def _layer_sizes(
    self: nn.Module,
    d_model: int,
    n_heads: int,
    head_dim: int,
    conv_size: int,
    norm_eps: float,
    **options: object,
) -> None:
    """Check a layer constructor's sizes, and the options of the layers that take them."""
    for name, value in (
        ("d_model", d_model),
        ("n_heads", n_heads),
        ("head_dim", head_dim),
        ("conv_size", conv_size),
    ):
        check_positive_int(name, value)
    check_eps("norm_eps", norm_eps)
    if "feature_map" in options:
        check_choice("feature_map", options["feature_map"], FEATURE_MAPS)
    for switch in ("normalize", "output_norm"):
        if switch in options and not isinstance(options[switch], bool):
            raise ValueError(
                f"{switch}: expected True or False, got {options[switch]!r}"
            )
    if "decay" in options:
        check_choice("decay", options["decay"], GLA_DECAYS)
    if "decay_rank" in options:
        check_positive_int("decay_rank", options["decay_rank"])


def _layer_inputs(
    self: nn.Module, x: torch.Tensor, cache: object, use_cache: bool
) -> None:
    """Check x ``[B, T, d_model]`` and a cache that continues this layer's sequence."""
    b, _ = check_layer_input(x, self.d_model, self.out.weight)
    if cache is None:
        return
    if not isinstance(cache, RecurrentCache):
        raise ValueError(
            f"cache: expected a RecurrentCache or None, got {type(cache).__name__}"
        )
    d = self.head_dim
    sizes = {"B": b, "H": self.n_heads, "Dk": d, "Dv": d}
    state, normalised = cache.state, getattr(self, "normalize", False)
    if normalised and (not isinstance(state, tuple) or len(state) != 2):
        raise ValueError(
            "cache.state: expected the pair (S, z) of normalised linear "
            f"attention (its normaliser z), got {type(state).__name__}"
        )
    s = state[0] if normalised else state
    check_tensor("cache.state", s, ("B", "H", "Dk", "Dv"), sizes)
    check_finite("cache.state", s)
    if normalised:
        check_tensor("cache.state (z)", state[1], ("B", "H", "Dk"), sizes)
        check_finite("cache.state (z)", state[1])
    if len(cache.conv) != 3:
        raise ValueError(
            f"cache.conv: expected 3 tensors (q, k, v), got {len(cache.conv)}"
        )
    width = self.n_heads * self.head_dim
    sizes = {"B": b, "K-1": self.q_conv.kernel_size - 1, "C": width}
    for name, c in zip("qkv", cache.conv, strict=True):
        check_tensor(f"cache.conv ({name})", c, ("B", "K-1", "C"), sizes)
        check_finite(f"cache.conv ({name})", c)


# --------------------------------------------------------------------------- the layers
class LinearAttentionLayer(nn.Module):
    """A linear-attention mixer layer (Katharopoulos et al. 2020, with a short convolution):

        q, k, v = φ(ShortConv(x W_q)), φ(ShortConv(x W_k)), ShortConv(x W_v)     φ: feature map
        o = linear_attention(q, k, v)
        y = merge_heads(o) W_o                    if normalize (the normaliser bounds o)
        y = merge_heads(RMSNorm(o)) W_o           otherwise (the state grows like t; the
                                                  per-head RMSNorm keeps o at unit scale)

    When normalised, the cache's state is the pair (S, z) with the key sum z ``[B, H, Dk]``.
    """

    @checked(_layer_sizes)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        feature_map: str = "elu+1",
        normalize: bool = True,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        self.phi, self.normalize = FEATURE_MAPS[feature_map], normalize
        width = n_heads * head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False)
        self.k_proj = nn.Linear(d_model, width, bias=False)
        self.v_proj = nn.Linear(d_model, width, bias=False)
        self.q_conv = ShortConvolution(width, conv_size)
        self.k_conv = ShortConvolution(width, conv_size)
        self.v_conv = ShortConvolution(width, conv_size)
        self.norm = None if normalize else RMSNorm(head_dim, eps=norm_eps)
        self.out = nn.Linear(width, d_model, bias=False)

    @checked(_layer_inputs)
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """x [B, T, d_model] -> (y [B, T, d_model], cache if use_cache)."""
        conv = (None, None, None) if cache is None else cache.conv
        q, q_conv = self.q_conv(self.q_proj(x), conv[0])
        k, k_conv = self.k_conv(self.k_proj(x), conv[1])
        v, v_conv = self.v_conv(self.v_proj(x), conv[2])
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        q, k = self.phi(q), self.phi(k)
        state = None if cache is None else cache.state
        if cache is None or x.shape[1] > 1:  # a prompt: chunkwise
            o, state = linear_attention_chunk(
                q,
                k,
                v,
                normalize=self.normalize,
                initial_state=state,
                output_final_state=use_cache,
            )
        else:  # decoding, one token: the step
            q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
            o, state = linear_attention_step(
                q, k, v, state=state, normalize=self.normalize
            )
            o = o.unsqueeze(2)
        if self.norm is not None:
            o = self.norm(o)
        y = self.out(merge_heads(o))
        conv = (q_conv, k_conv, v_conv)
        return y, RecurrentCache(state, conv) if use_cache else None


class GLALayer(nn.Module):
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

    @checked(_layer_sizes)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        decay: str = "channel",
        decay_rank: int = 16,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        width = n_heads * head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False)
        self.k_proj = nn.Linear(d_model, width, bias=False)
        self.v_proj = nn.Linear(d_model, width, bias=False)
        self.q_conv = ShortConvolution(width, conv_size)
        self.k_conv = ShortConvolution(width, conv_size)
        self.v_conv = ShortConvolution(width, conv_size)
        self.norm = RMSNorm(head_dim, eps=norm_eps)
        self.out = nn.Linear(width, d_model, bias=False)
        ### NEW: a decay, and a swish gate on the output
        self.decay = decay
        if decay == "channel":
            self.decay_proj = nn.Sequential(
                nn.Linear(d_model, decay_rank, bias=False),
                nn.Linear(decay_rank, width),
            )
        elif decay == "scalar":  # dt_bias is the bias
            self.decay_proj = nn.Linear(d_model, n_heads, bias=False)
            a_log, dt_bias = init_softplus_decay(n_heads, n_heads)
            self.A_log = nn.Parameter(a_log)
            self.dt_bias = nn.Parameter(dt_bias)
        else:
            log_gamma = retnet_decay(n_heads)
            self.register_buffer("log_gamma", log_gamma, persistent=False)
        self.g_proj = nn.Linear(d_model, width, bias=False)

    def log_gate(self, x: torch.Tensor) -> torch.Tensor:
        """g for input x ``[B, T, d_model]``: ``[B, H, T, Dk]`` (channel) or ``[B, H, T]``."""
        if self.decay == "channel":
            g = F.logsigmoid(self.decay_proj(x)) / GLA_GATE_NORMALIZER
            return split_heads(g, self.n_heads)
        if self.decay == "scalar":
            raw = self.decay_proj(x)
            return softplus_decay_gate(raw, self.A_log, self.dt_bias).mT
        b, t, _ = x.shape
        return self.log_gamma[None, :, None].expand(b, self.n_heads, t)

    @checked(_layer_inputs)
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """x [B, T, d_model] -> (y [B, T, d_model], cache if use_cache)."""
        conv = (None, None, None) if cache is None else cache.conv
        q, q_conv = self.q_conv(self.q_proj(x), conv[0])
        k, k_conv = self.k_conv(self.k_proj(x), conv[1])
        v, v_conv = self.v_conv(self.v_proj(x), conv[2])
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        q, k, v = F.silu(q), F.silu(k), F.silu(v)  ### NEW: SiLU
        g = self.log_gate(x)  ### NEW: the decay
        state = None if cache is None else cache.state
        if cache is None or x.shape[1] > 1:  # a prompt: chunkwise
            o, state = gla_chunk(
                q,
                k,
                v,
                g=g,
                initial_state=state,
                output_final_state=use_cache,
            )
        else:  # decoding, one token: the step
            q, k, v, g = q[:, :, 0], k[:, :, 0], v[:, :, 0], g[:, :, 0]
            if g.dim() == 2:  # one decay per head: the same for every channel
                g = g[..., None].expand_as(q)
            o, state = gla_step(q, k, v, g=g, state=state)
            o = o.unsqueeze(2)
        o = self.norm(o)
        ### NEW: the output gate, a swish
        gate = F.silu(split_heads(self.g_proj(x), self.n_heads))
        y = self.out(merge_heads(gate * o))
        conv = (q_conv, k_conv, v_conv)
        return y, RecurrentCache(state, conv) if use_cache else None


class DeltaNetLayer(nn.Module):
    """DeltaNet (the Notation appendix, §4): the delta rule, no decay and no output gate (as FLA).

    q, k = L2Norm(SiLU(q)), L2Norm(SiLU(k)),  v = SiLU(v)     (after the short convolution)
    β = sigmoid(x W_β), one per head and token
    y = merge_heads(RMSNorm_head(delta_rule(q, k, v, β))) W_o
    """

    @checked(_layer_sizes)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        width = n_heads * head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False)
        self.k_proj = nn.Linear(d_model, width, bias=False)
        self.v_proj = nn.Linear(d_model, width, bias=False)
        self.q_conv = ShortConvolution(width, conv_size)
        self.k_conv = ShortConvolution(width, conv_size)
        self.v_conv = ShortConvolution(width, conv_size)
        self.beta_proj = nn.Linear(d_model, n_heads, bias=False)  ### NEW: β
        self.norm = RMSNorm(head_dim, eps=norm_eps)
        self.out = nn.Linear(width, d_model, bias=False)

    @checked(_layer_inputs)
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """x [B, T, d_model] -> (y [B, T, d_model], cache if use_cache)."""
        conv = (None, None, None) if cache is None else cache.conv
        q, q_conv = self.q_conv(self.q_proj(x), conv[0])
        k, k_conv = self.k_conv(self.k_proj(x), conv[1])
        v, v_conv = self.v_conv(self.v_proj(x), conv[2])
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        ### NEW: unit-length keys and queries, and a write strength β per token
        q, k, v = l2_normalise(F.silu(q)), l2_normalise(F.silu(k)), F.silu(v)
        beta = torch.sigmoid(self.beta_proj(x)).mT  # [B, H, T]
        state = None if cache is None else cache.state
        if cache is None or x.shape[1] > 1:  # a prompt: chunkwise
            o, state = delta_rule_chunk(
                q,
                k,
                v,
                beta=beta,
                initial_state=state,
                output_final_state=use_cache,
            )
        else:  # decoding, one token: the step
            q, k, v, beta = q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0]
            o, state = delta_rule_step(q, k, v, beta=beta, state=state)
            o = o.unsqueeze(2)
        y = self.out(merge_heads(self.norm(o)))
        conv = (q_conv, k_conv, v_conv)
        return y, RecurrentCache(state, conv) if use_cache else None


class GatedDeltaNetLayer(nn.Module):
    """Gated DeltaNet (the Notation appendix, §5): DeltaNet with a decay per
    head and token, and a sigmoid gate on the output.

        g = −exp(A_log) · softplus(x W_a + dt_bias)              [B, H, T]
        o = gated_delta_rule(q, k, v, g, β)
        y = merge_heads(sigmoid(x W_g) ⊙ RMSNorm(o)) W_o

    The output gate is a sigmoid, not the swish of FLA's GDN layer: Kimi
    Linear found sigmoid better (KL Table 1) and used it for its GDN-H
    baseline (KL §5.2), so GDN and KDA differ only in the decay. At x = 0
    the decay α = exp(−A·Δ) starts in [0.2, 0.999], mostly close to 1
    (``init_softplus_decay``): the layer starts out remembering. FLA's
    GatedDeltaNet initialises Δ the same way but draws A from U(0, 16);
    here A ~ U(1, 16), as in FLA's KDA layer.
    """

    @checked(_layer_sizes)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        width = n_heads * head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False)
        self.k_proj = nn.Linear(d_model, width, bias=False)
        self.v_proj = nn.Linear(d_model, width, bias=False)
        self.q_conv = ShortConvolution(width, conv_size)
        self.k_conv = ShortConvolution(width, conv_size)
        self.v_conv = ShortConvolution(width, conv_size)
        self.beta_proj = nn.Linear(d_model, n_heads, bias=False)
        self.norm = RMSNorm(head_dim, eps=norm_eps)
        self.out = nn.Linear(width, d_model, bias=False)
        ### NEW: Mamba-2's decay, one per head, and an output gate
        self.decay_proj = nn.Linear(d_model, n_heads, bias=False)
        a_log, dt_bias = init_softplus_decay(n_heads, n_heads)
        self.A_log, self.dt_bias = nn.Parameter(a_log), nn.Parameter(dt_bias)
        self.g_proj = nn.Linear(d_model, width, bias=False)

    def log_gate(self, x: torch.Tensor) -> torch.Tensor:
        """g = −exp(A_log) · softplus(x W_a + dt_bias)  [B, H, T]."""
        raw = self.decay_proj(x)
        return softplus_decay_gate(raw, self.A_log, self.dt_bias).mT

    @checked(_layer_inputs)
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """x [B, T, d_model] -> (y [B, T, d_model], cache if use_cache)."""
        conv = (None, None, None) if cache is None else cache.conv
        q, q_conv = self.q_conv(self.q_proj(x), conv[0])
        k, k_conv = self.k_conv(self.k_proj(x), conv[1])
        v, v_conv = self.v_conv(self.v_proj(x), conv[2])
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        q, k, v = l2_normalise(F.silu(q)), l2_normalise(F.silu(k)), F.silu(v)
        beta = torch.sigmoid(self.beta_proj(x)).mT  # [B, H, T]
        g = self.log_gate(x)  ### NEW: the decay  [B, H, T]
        state = None if cache is None else cache.state
        if cache is None or x.shape[1] > 1:  # a prompt: chunkwise
            o, state = gated_delta_rule_chunk(
                q,
                k,
                v,
                g=g,
                beta=beta,
                initial_state=state,
                output_final_state=use_cache,
            )
        else:  # decoding, one token: the step
            q, k, v, beta = q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0]
            o, state = gated_delta_rule_step(
                q, k, v, g=g[:, :, 0], beta=beta, state=state
            )
            o = o.unsqueeze(2)
        o = self.norm(o)
        ### NEW: the output gate
        gate = torch.sigmoid(split_heads(self.g_proj(x), self.n_heads))
        y = self.out(merge_heads(gate * o))
        conv = (q_conv, k_conv, v_conv)
        return y, RecurrentCache(state, conv) if use_cache else None


class KDALayer(nn.Module):
    """The KDA layer of Kimi Linear (KL §4, eq. 10; the Notation appendix, §6):

        g = −exp(A_log) ⊙ softplus(x W↓_α W↑_α + dt_bias)    [B, H, T, Dk], rank head_dim
        y = merge_heads(sigmoid(x W↓_g W↑_g) ⊙ RMSNorm_head(kda(q, k, v, g, β))) W_o

    Both gates are low-rank with rank head_dim (FLA's ``f_proj`` and ``g_proj``; here
    ``decay_proj`` and ``g_proj``), and the output gate is a sigmoid (KL Table 1: better than no
    gate and than swish). A = exp(A_log) ~ U(1, 16) per head, and softplus(dt_bias) is
    log-uniform in [1e-3, 1e-1] per channel (``init_softplus_decay``): at x = 0 the decay
    α = exp(−A·Δ) lies in [0.2, 0.999], mostly close to 1, so the layer starts out remembering
    and a few channels forget fast. This differs from FLA's ``KimiDeltaAttention``, which
    starts from dt_bias = 0 (A ~ U(1, 16) as here): softplus(raw) ≈ 0.69 at a small input, so
    most of its decays start near 0 (Lesson 14 measures both medians on one input). Prefill
    uses :func:`kda_chunk`; a one-token step :func:`kda_step`.

    ``output_norm=False`` drops the per-head RMSNorm (``norm`` is then the identity, and o
    reaches the gate as the kernel returns it): the ablation of Lesson 14, which also drops
    the short convolutions' mixing over time with ``conv_size=1``.
    """

    @checked(_layer_sizes)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        conv_size: int = 4,
        norm_eps: float = LAYER_NORM_EPS,
        output_norm: bool = True,
    ) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        width = n_heads * head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False)
        self.k_proj = nn.Linear(d_model, width, bias=False)
        self.v_proj = nn.Linear(d_model, width, bias=False)
        self.q_conv = ShortConvolution(width, conv_size)
        self.k_conv = ShortConvolution(width, conv_size)
        self.v_conv = ShortConvolution(width, conv_size)
        self.beta_proj = nn.Linear(d_model, n_heads, bias=False)
        self.norm = (
            RMSNorm(head_dim, eps=norm_eps) if output_norm else nn.Identity()
        )
        self.out = nn.Linear(width, d_model, bias=False)
        ### NEW: a decay per channel and a low-rank output gate (rank head_dim)
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
        g = softplus_decay_gate(raw, self.A_log[:, None], dt_bias)
        return g.transpose(1, 2)

    @checked(_layer_inputs)
    def forward(
        self,
        x: torch.Tensor,
        cache: RecurrentCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, RecurrentCache | None]:
        """x [B, T, d_model] -> (y [B, T, d_model], cache if use_cache)."""
        conv = (None, None, None) if cache is None else cache.conv
        q, q_conv = self.q_conv(self.q_proj(x), conv[0])
        k, k_conv = self.k_conv(self.k_proj(x), conv[1])
        v, v_conv = self.v_conv(self.v_proj(x), conv[2])
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        q, k, v = l2_normalise(F.silu(q)), l2_normalise(F.silu(k)), F.silu(v)
        beta = torch.sigmoid(self.beta_proj(x)).mT  # [B, H, T]
        g = self.log_gate(x)  ### NEW: one decay per channel  [B, H, T, Dk]
        state = None if cache is None else cache.state
        if cache is None or x.shape[1] > 1:  # a prompt: chunkwise
            o, state = kda_chunk(
                q,
                k,
                v,
                g=g,
                beta=beta,
                initial_state=state,
                output_final_state=use_cache,
            )
        else:  # decoding, one token: the step
            q, k, v, beta = q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0]
            o, state = kda_step(q, k, v, g=g[:, :, 0], beta=beta, state=state)
            o = o.unsqueeze(2)
        o = self.norm(o)
        gate = torch.sigmoid(split_heads(self.g_proj(x), self.n_heads))
        y = self.out(merge_heads(gate * o))
        conv = (q_conv, k_conv, v_conv)
        return y, RecurrentCache(state, conv) if use_cache else None

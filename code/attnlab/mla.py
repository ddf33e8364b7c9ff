"""Multi-head latent attention (MLA, DeepSeek-V2 §2.1 and App. C; the Notation appendix, §7).

Instead of per-head keys and values, MLA caches one small latent per token, shared by all heads:

    c_t = RMSNorm(W^DKV h_t) ∈ R^{d_c},   k^R_t = RoPE(W^KR h_t) ∈ R^{d_h^R},
    k_{t,i} = [W^UK_i c_t ; k^R_t],   v_{t,i} = W^UV_i c_t,
    q_{t,i} = [q^C_{t,i} ; RoPE(q^R_{t,i})]   with [q^C_t ; q^R_t] = W^Q h_t (or W^UQ W^DQ h_t),
    o_{t,i} = Σ_{j<=t} softmax_j(q_{t,i}·k_{j,i} / sqrt(d_h + d_h^R)) v_{j,i},
    u_t = W^O [o_{t,1}; …; o_{t,n_h}].

The cache holds (c_t, k^R_t): d_c + d_h^R numbers per token per layer instead of 2·n_h·d_h.
With ``rope=False`` (NoPE, as in Kimi Linear's MLA layers) the k^R / q^R parts are still
projected and cached but never rotated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import (
    _check_layer_options,
    _layer_pieces,
    apply_rope,
    check_score_bytes,
    merge_heads,
    softmax_attention,
    split_heads,
)
from .blocks import RMSNorm
from .checks import (
    check_finite,
    check_layer_input,
    check_positive_int,
    check_tensor,
    checked,
)


def _check_append(
    self: LatentCache, c_kv_new: object, k_rope_new: object
) -> None:
    """c_kv_new ``[B, T_new, d_c]`` and k_rope_new ``[B, T_new, d_h^R]`` fit the cache."""
    (b, _, d_c), d_r = self.c_kv.shape, self.k_rope.shape[2]
    like = {
        "dtype": self.c_kv.dtype,
        "device": self.c_kv.device,
        "like": "cache.c_kv",
    }
    sizes = check_tensor(
        "c_kv_new",
        c_kv_new,
        ("B", "T_new", "d_c"),
        {"B": b, "d_c": d_c},
        **like,
    )
    sizes["d_R"] = d_r
    check_tensor(
        "k_rope_new", k_rope_new, ("B", "T_new", "d_R"), sizes, **like
    )
    check_finite("c_kv_new", c_kv_new)
    check_finite("k_rope_new", k_rope_new)


@dataclass
class LatentCache:
    """What an MLA layer caches: c_kv ``[B, T, d_c]`` (after RMSNorm) and k_rope ``[B, T, d_h^R]``
    (already rotated, or unrotated under NoPE). Shared by all heads."""

    c_kv: Tensor
    k_rope: Tensor

    def __post_init__(self) -> None:
        sizes = check_tensor("c_kv", self.c_kv, ("B", "T", "d_c"))
        check_tensor(
            "k_rope",
            self.k_rope,
            ("B", "T", "d_R"),
            sizes,
            dtype=self.c_kv.dtype,
            device=self.c_kv.device,
        )
        check_finite("c_kv", self.c_kv)
        check_finite("k_rope", self.k_rope)

    @property
    def length(self) -> int:
        """Number of cached tokens T (the absolute position of the next token)."""
        return self.c_kv.shape[1]

    @checked(_check_append)
    def append(
        self, c_kv_new: Tensor, k_rope_new: Tensor
    ) -> tuple[Tensor, Tensor]:
        """c ← [c; c_new], k^R ← [k^R; k^R_new] along time (in place); returns the full pair.

        c_kv_new ``[B, T_new, d_c]``, k_rope_new ``[B, T_new, d_h^R]``.
        """
        self.c_kv = torch.cat([self.c_kv, c_kv_new], dim=1)
        self.k_rope = torch.cat([self.k_rope, k_rope_new], dim=1)
        return self.c_kv, self.k_rope

    def num_bytes(self) -> int:
        """Bytes held: B · T · (d_c + d_h^R) · bytes per element."""
        return sum(
            t.numel() * t.element_size() for t in (self.c_kv, self.k_rope)
        )


def _check_cache_dims(kv_lora_rank: object, qk_rope_head_dim: object) -> None:
    check_positive_int("kv_lora_rank", kv_lora_rank)
    check_positive_int("qk_rope_head_dim", qk_rope_head_dim)


@checked(_check_cache_dims)
def mla_cache_elements_per_token(
    kv_lora_rank: int, qk_rope_head_dim: int
) -> int:
    """Numbers MLA caches per token per layer: d_c + d_h^R (DeepSeek-V3: 512 + 64 = 576)."""
    return kv_lora_rank + qk_rope_head_dim


def _check_layer_call(
    self: MultiHeadLatentAttention,
    x: object,
    cache: object,
    absorb: object,
    **_: object,
) -> None:
    """x ``[B, T, d_model]`` like the layer's weights; a cache that holds this layer's latents."""
    b, t = check_layer_input(x, self.d_model, self.w_o.weight)
    if not isinstance(absorb, bool):
        raise ValueError(f"absorb: expected True or False, got {absorb!r}")
    past = cache.length if isinstance(cache, LatentCache) else 0
    sizes = (b, self.n_heads, t, past + t)
    check_score_bytes("x", sizes, x.dtype, _layer_pieces(can_cache=True))
    if cache is None:
        return
    if not isinstance(cache, LatentCache):
        raise ValueError(
            f"cache: expected a LatentCache or None, got {type(cache).__name__}"
        )
    like = {"dtype": x.dtype, "device": x.device, "like": "x"}
    sizes = {"B": b, "d_c": self.kv_lora_rank, "d_R": self.qk_rope_head_dim}
    check_tensor("cache.c_kv", cache.c_kv, ("B", "T", "d_c"), sizes, **like)
    check_tensor(
        "cache.k_rope", cache.k_rope, ("B", "T", "d_R"), sizes, **like
    )


class MultiHeadLatentAttention(nn.Module):
    """Causal MLA layer with a latent KV cache (``LatentCache``) and decoupled RoPE.

    ``head_dim`` is d_h, the no-RoPE part of each query/key head (``qk_nope_head_dim``);
    ``kv_lora_rank`` is d_c; ``qk_rope_head_dim`` is d_h^R; ``v_head_dim`` defaults to d_h.
    ``q_lora_rank`` None is a full-rank W^Q (Kimi Linear), else queries go through a d_c'
    bottleneck with RMSNorm (DeepSeek). ``rope=False`` is NoPE. Scale 1/sqrt(d_h + d_h^R).

    As DeepSeek-V3 (its inference code names the two norms ``kv_norm`` and ``q_norm``, Hugging
    Face ``kv_a_layernorm`` and ``q_a_layernorm``; both with eps 1e-6, its ``rms_norm_eps``):

        c^KV_t = RMSNorm(W^DKV h_t)                       (``w_dkv``, ``kv_norm``)
        [q^C_t ; q^R_t] = W^Q h_t                         q_lora_rank None (``w_q``)
        [q^C_t ; q^R_t] = W^UQ RMSNorm(W^DQ h_t)          W^DQ: d → d_c' (``w_dq``, ``q_norm``,
                                                          ``w_uq``)

    ``forward(x, cache, use_cache, absorb=False)``: ``absorb=False`` up-projects the latent to
    per-head keys and values (``attend_naive``); ``absorb=True`` attends in the latent space
    (``attend_absorbed``), the decode-time path. Both give the same output.
    x ``[B, T, d_model]`` -> ``(y [B, T, d_model], LatentCache or None)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        kv_lora_rank: int,
        qk_rope_head_dim: int,
        v_head_dim: int | None = None,
        q_lora_rank: int | None = None,
        rope: bool = True,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.n_heads = check_positive_int("n_heads", n_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.kv_lora_rank = check_positive_int("kv_lora_rank", kv_lora_rank)
        self.qk_rope_head_dim = check_positive_int(
            "qk_rope_head_dim", qk_rope_head_dim
        )
        self.v_head_dim = check_positive_int(
            "v_head_dim", head_dim if v_head_dim is None else v_head_dim
        )
        if rope and qk_rope_head_dim % 2:
            raise ValueError(
                f"qk_rope_head_dim: RoPE rotates pairs, expected an even size, "
                f"got {qk_rope_head_dim}"
            )
        _check_layer_options(rope, rope_base, conv_size=None)
        self.rope = rope
        self.rope_base = rope_base
        self.scale = (head_dim + qk_rope_head_dim) ** -0.5
        q_width = n_heads * (head_dim + qk_rope_head_dim)
        self.q_lora_rank = q_lora_rank
        if q_lora_rank is None:
            self.w_q = nn.Linear(d_model, q_width, bias=False)
        else:
            check_positive_int("q_lora_rank", q_lora_rank)
            self.w_dq = nn.Linear(d_model, q_lora_rank, bias=False)
            self.q_norm = RMSNorm(q_lora_rank)
            self.w_uq = nn.Linear(q_lora_rank, q_width, bias=False)
        self.w_dkv = nn.Linear(d_model, kv_lora_rank, bias=False)
        self.kv_norm = RMSNorm(kv_lora_rank)
        self.w_kr = nn.Linear(d_model, qk_rope_head_dim, bias=False)
        self.w_uk = nn.Linear(kv_lora_rank, n_heads * head_dim, bias=False)
        self.w_uv = nn.Linear(
            kv_lora_rank, n_heads * self.v_head_dim, bias=False
        )
        self.w_o = nn.Linear(n_heads * self.v_head_dim, d_model, bias=False)

    @checked(_check_layer_call)
    def forward(
        self,
        x: Tensor,
        cache: LatentCache | None = None,
        use_cache: bool = False,
        *,
        absorb: bool = False,
    ) -> tuple[Tensor, LatentCache | None]:
        """Attend over the cached prefix and x; the cache (if any, or new if ``use_cache``) grows
        by T tokens in place and is returned, so passing it back continues the sequence."""
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        q = split_heads(self.query(x), self.n_heads)  # [B, H, T, d_h + d_h^R]
        q_nope, q_rope = q.split(
            [self.head_dim, self.qk_rope_head_dim], dim=-1
        )
        c_kv = self.kv_norm(self.w_dkv(x))  # [B, T, d_c]
        k_rope = self.w_kr(x)  # [B, T, d_h^R]
        if self.rope:
            q_rope = apply_rope(q_rope, positions, self.rope_base)
            k_rope = apply_rope(k_rope[:, None], positions, self.rope_base)
            k_rope = k_rope[:, 0]  # one head, shared by all
        if cache is not None:
            c_kv, k_rope = cache.append(c_kv, k_rope)
        elif use_cache:
            cache = LatentCache(c_kv, k_rope)
        attend = self.attend_absorbed if absorb else self.attend_naive
        o = attend(q_nope, q_rope, c_kv, k_rope)
        return self.w_o(merge_heads(o)), cache

    def query(self, x: Tensor) -> Tensor:
        """[q^C ; q^R] for every head, before RoPE: W^Q x, or W^UQ RMSNorm(W^DQ x) with a query
        bottleneck. x ``[B, T, d_model]`` -> ``[B, T, H·(d_h + d_h^R)]``."""
        if self.q_lora_rank is None:
            return self.w_q(x)
        return self.w_uq(self.q_norm(self.w_dq(x)))

    def attend_naive(
        self, q_nope: Tensor, q_rope: Tensor, c_kv: Tensor, k_rope: Tensor
    ) -> Tensor:
        """Up-project the latent to per-head keys and values, then attend:

            k_{j,i} = [W^UK_i c_j ; k^R_j],   v_{j,i} = W^UV_i c_j,
            o_i = softmax(q_i·k_i / sqrt(d_h + d_h^R)) v_i.

        q_nope ``[B, H, Tq, d_h]``, q_rope ``[B, H, Tq, d_h^R]``, c_kv
        ``[B, Tk, d_c]``, k_rope ``[B, Tk, d_h^R]`` -> o ``[B, H, Tq, d_v]``.
        """
        h = self.n_heads
        k_nope = split_heads(self.w_uk(c_kv), h)  # [B, H, Tk, d_h]
        v = split_heads(self.w_uv(c_kv), h)  # [B, H, Tk, d_v]
        # one RoPE key shared by all heads
        k_rope_heads = k_rope[:, None].expand(-1, h, -1, -1)
        q = torch.cat([q_nope, q_rope], dim=-1)
        k = torch.cat([k_nope, k_rope_heads], dim=-1)
        o, _ = softmax_attention(q, k, v, causal=True, scale=self.scale)
        return o

    def attend_absorbed(
        self, q_nope: Tensor, q_rope: Tensor, c_kv: Tensor, k_rope: Tensor
    ) -> Tensor:
        """Attend in the latent space: fold W^UK into the query, W^UV after:

            q^C_i · (W^UK_i c_j) = (W^UK_iᵀ q^C_i) · c_j,
            o_i = W^UV_i Σ_j p_ij c_j.

        Every head attends over the one shared cache [c ; k^R]: MQA with key
        size d_c + d_h^R and value size d_c. Same shapes and result as
        ``attend_naive``.
        """
        h, d_c = self.n_heads, self.kv_lora_rank
        # W^UK_i: [d_h, d_c] per head
        w_uk = self.w_uk.weight.view(h, self.head_dim, d_c)
        # W^UV_i: [d_v, d_c] per head
        w_uv = self.w_uv.weight.view(h, self.v_head_dim, d_c)
        # W^UK_iᵀ q^C_i: [B, H, Tq, d_c]
        q_latent = torch.einsum("bhtd,hdc->bhtc", q_nope, w_uk)
        q = torch.cat([q_latent, q_rope], dim=-1)
        # [B, H, Tk, d_c+d_R]
        k = torch.cat([c_kv, k_rope], dim=-1)[:, None].expand(-1, h, -1, -1)
        v = c_kv[:, None].expand(-1, h, -1, -1)  # [B, H, Tk, d_c]
        # Σ_j p_ij c_j: [B, H, Tq, d_c]
        o_c, _ = softmax_attention(q, k, v, causal=True, scale=self.scale)
        return torch.einsum(
            "bhtc,hvc->bhtv", o_c, w_uv
        )  # W^UV_i (Σ_j p_ij c_j)

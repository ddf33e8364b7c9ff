"""The transition matrices of one chunk multiplied out, literally and by the WY representation:
the delta rule's (Lesson 13, against :func:`attnlab.delta.ut_transform`) and KDA's (Lesson 20,
the Kimi Linear report's index erratum).

Each recurrence of the delta-rule family is affine in the state, ``S_r = P^r S_0 + (the
writes)``; these functions compute ``P^r`` for a chunk of C tokens: ``transition_product`` and
``kda_transition_products`` by C sequential ``Dk × Dk`` products (the slow, literal way), and
``kda_wy_transitions`` from the WY form of the report (KL eqs. 3–5), with the decay from token i
to r read either correctly (over (i, r]) or as the report's §2.1 defines it (over [i, r]).
"""

from __future__ import annotations

import torch

from attnlab.checks import check_finite, check_range, check_tensor, checked

CHUNK = ("B", "H", "C")


def _chunk(k, beta, g=None, include_start=False):
    """k ``[B, H, C, Dk]``, beta ``[B, H, C]`` >= 0 and log-gates g ``[B, H, C, Dk]`` <= 0
    (if given), like k and finite; ``include_start`` True or False."""
    sizes = check_tensor("k", k, (*CHUNK, "Dk"))
    like = {"dtype": k.dtype, "device": k.device, "like": "k"}
    check_tensor("beta", beta, CHUNK, sizes, **like)
    check_finite("k", k)
    check_range("beta", beta, 0.0, None)
    if g is not None:
        check_tensor("g", g, (*CHUNK, "Dk"), sizes, **like)
        check_range("g", g, None, 0.0)
        check_finite("g", g)
    if not isinstance(include_start, bool):
        raise ValueError(
            f"include_start: expected True or False, got {include_start!r}"
        )


@checked(_chunk)
def transition_product(k, *, beta):
    """The delta rule's C transitions multiplied out, the latest on the left:

        P_C = (I − β_C k_C k_Cᵀ) ⋯ (I − β_1 k_1 k_1ᵀ)

    so that S_C = P_C S_0 + (the writes). k [B, H, C, Dk]; beta [B, H, C]
    -> P_C [B, H, Dk, Dk]: what ``ut_transform`` gives as I − Kᵀ W.
    """
    eye = torch.eye(k.shape[-1], dtype=k.dtype, device=k.device)
    product = eye.expand(*k.shape[:2], -1, -1)
    for t in range(k.shape[2]):
        k_t, beta_t = k[:, :, t], beta[:, :, t, None, None]
        product = (
            eye - beta_t * k_t[..., :, None] * k_t[..., None, :]
        ) @ product
    return product


@checked(_chunk)
def kda_transition_products(k, *, g, beta):
    """KDA's transitions multiplied out, the latest on the left, α_i = exp(g_i):

        P^r = (I − β_r k_r k_rᵀ) Diag(α_r) ⋯ (I − β_1 k_1 k_1ᵀ) Diag(α_1)

    so that S_r = P^r S_0 + (the writes). k, g [B, H, C, Dk]; beta [B, H, C]
    -> P^1 … P^C stacked, [B, H, C, Dk, Dk]: the reference for
    :func:`kda_wy_transitions`.
    """
    eye = torch.eye(k.shape[-1], dtype=k.dtype, device=k.device)
    product = eye.expand(*k.shape[:2], -1, -1)
    products = []
    for r in range(k.shape[2]):
        k_r, beta_r = k[:, :, r], beta[:, :, r, None, None]
        erase = eye - beta_r * k_r[..., :, None] * k_r[..., None, :]
        product = erase @ (g[:, :, r].exp()[..., :, None] * product)
        products.append(product)
    return torch.stack(products, dim=2)


@checked(_chunk)
def kda_wy_transitions(k, *, g, beta, include_start=False):
    """P^1 … P^C from the WY representation of the Kimi Linear report (KL
    eqs. 3–5):

        P^r = Diag(γ^r) − Σ_{i≤r} Diag(γ^{i→r}) k_i w_iᵀ
        w_r = β_r ( Diag(γ^r) k_r − Σ_{i<r} w_i (k_iᵀ Diag(γ^{i→r}) k_r) )

    with γ^r = Π_{s=1..r} α_s. The decay from token i to r must exclude i,
    γ^{i→r} = Π_{s=i+1..r} α_s = exp(B_r − B_i) (B the cumulative sum of g):
    what FLA implements as exp(g_last − g_i), and then the result equals
    :func:`kda_transition_products`. ``include_start=True`` reads γ^{i→r}
    with the report's own §2.1 definition, Π_{s=i..r} α_s, which already
    fails at r = 1 (the Notation appendix, §6 and §10: the index erratum).
    k, g [B, H, C, Dk]; beta [B, H, C] -> [B, H, C, Dk, Dk].
    """
    b = g.cumsum(dim=2)  # B  [B, H, C, Dk]

    def decay(i: int, r: int) -> torch.Tensor:  # γ^{i→r}  [B, H, Dk]
        log = b[:, :, r] - b[:, :, i] + (g[:, :, i] if include_start else 0.0)
        return log.exp()

    ws: list[torch.Tensor] = []
    out = []
    for r in range(k.shape[2]):
        k_r = k[:, :, r]
        w_r = b[:, :, r].exp() * k_r
        for i in range(r):
            # k_iᵀ Diag(γ) k_r
            overlap = (k[:, :, i] * decay(i, r) * k_r).sum(-1, keepdim=True)
            w_r = w_r - ws[i] * overlap
        ws.append(beta[:, :, r, None] * w_r)
        p_r = torch.diag_embed(b[:, :, r].exp())
        for i in range(r + 1):
            p_r = (
                p_r
                - (decay(i, r) * k[:, :, i])[..., :, None]
                * ws[i][..., None, :]
            )
        out.append(p_r)
    return torch.stack(out, dim=2)

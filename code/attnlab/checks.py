"""Input validation at the public boundary, shared by every kernel and layer.

A public function is decorated with ``@checked(validator)``: the validator sees the caller's
arguments first, so a wrong shape, dtype, device or value fails with a ``ValueError`` that
names the argument, what was expected and what came, instead of a bare error deep inside a
matmul, and the function's own lines are left to the maths. Validation happens once, at the
outermost public call: a checked function called from inside another one (a kernel inside a
layer, a step inside a recurrence) runs without checking again.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence

import torch

_INSIDE_A_CHECKED_CALL = contextvars.ContextVar(
    "inside_checked", default=False
)


def checked(validate: Callable[..., object]) -> Callable:
    """Decorate a public function so that ``validate(**arguments)`` runs before it.

    ``validate`` receives every parameter of the function by name, defaults filled in
    (``self`` too, for a method), and raises ``ValueError``/``TypeError`` naming the caller's
    argument. Calls made while another checked call is running skip the validation: the
    outermost call has checked the inputs they derive from.
    """

    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def public(*args, **kwargs):
            if _INSIDE_A_CHECKED_CALL.get():
                return fn(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{fn.__qualname__}(): {error}") from None
            bound.apply_defaults()
            validate(**bound.arguments)
            token = _INSIDE_A_CHECKED_CALL.set(True)
            try:
                return fn(*args, **kwargs)
            finally:
                _INSIDE_A_CHECKED_CALL.reset(token)

        return public

    return decorate


def as_outside_caller(fn: Callable, /, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` as a caller outside every checked call would: a checked
    ``fn`` validates its arguments even when this runs inside another checked call (e.g. to
    time a public function with its checks)."""
    return contextvars.Context().run(fn, *args, **kwargs)


FLOAT_DTYPES = (torch.float32, torch.float64)


def check_tensor(
    name: str,
    x: object,
    dims: Sequence[str],
    sizes: dict[str, int] | None = None,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    like: str = "q",
) -> dict[str, int]:
    """Check that ``x`` is a float tensor whose shape matches the named ``dims``.

    ``dims`` names each axis, e.g. ``("B", "H", "T", "Dk")``. ``sizes`` maps names already fixed
    by earlier arguments to their size; new names are added to it, so calling this once per
    argument checks that all arguments agree. ``dtype`` and ``device``, when given, are those of
    the argument named ``like``, which the message names. Returns ``sizes``.

    Raises ``ValueError`` naming ``name``, the expected shape and the shape given.
    """
    sizes = {} if sizes is None else sizes
    if not isinstance(x, torch.Tensor):
        raise ValueError(
            f"{name}: expected a torch.Tensor, got {type(x).__name__}"
        )
    expected = "[" + ", ".join(dims) + "]"
    if x.dim() != len(dims):
        raise ValueError(
            f"{name}: expected a {len(dims)}-D tensor {expected}, got shape {tuple(x.shape)}"
        )
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"{name}: expected dtype float32 or float64, got {x.dtype}"
        )
    if dtype is not None and x.dtype != dtype:
        raise ValueError(
            f"{name}: expected dtype {dtype} (like {like}), got {x.dtype}"
        )
    if device is not None and x.device != device:
        raise ValueError(
            f"{name}: expected device {device} (like {like}), got {x.device}"
        )
    for dim, size in zip(dims, x.shape, strict=True):
        if dim in sizes and sizes[dim] != size:
            want = ", ".join(
                f"{d}={sizes[d]}" if d in sizes else d for d in dims
            )
            raise ValueError(
                f"{name}: expected shape [{want}], got {tuple(x.shape)} ({dim} is {size}, "
                f"expected {sizes[dim]})"
            )
        sizes[dim] = size
    return sizes


def check_range(
    name: str, x: torch.Tensor, low: float | None, high: float | None
) -> None:
    """Check ``low <= x <= high`` elementwise (either bound may be None); NaN is rejected too."""
    if torch.isnan(x).any():
        raise ValueError(f"{name}: contains NaN")
    if low is not None and (x < low).any():
        raise ValueError(
            f"{name}: expected values >= {low}, got min {x.min().item():.4g}"
        )
    if high is not None and (x > high).any():
        raise ValueError(
            f"{name}: expected values <= {high}, got max {x.max().item():.4g}"
        )


def check_finite(name: str, x: torch.Tensor) -> None:
    """Check that no entry of ``x`` is NaN or ±inf.

    Kernels refuse such inputs instead of spreading them: one NaN in q, k or v would make every
    later output and the whole state NaN. One fast pass first: a finite sum means every entry
    is finite (a NaN or inf makes the sum NaN or inf); only a non-finite sum, which finite
    entries too large to add also give, is checked entry by entry.
    """
    x = x.detach()
    if torch.isfinite(x.sum()) or torch.isfinite(x).all():
        return
    found = "NaN" if torch.isnan(x).any() else "inf"
    raise ValueError(
        f"{name}: expected finite values, got {found} (shape {tuple(x.shape)})"
    )


def check_positive_int(name: str, value: object) -> int:
    """Check that ``value`` is an int >= 1 (bools rejected) and return it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{name}: expected a positive integer, got {value!r}"
        )
    return value


def check_choice(
    name: str,
    value: object,
    choices: Sequence[object] | Mapping[object, object],
):
    """Check that ``value`` is one of ``choices`` and return it."""
    if value not in choices:
        raise ValueError(
            f"{name}: expected one of {list(choices)}, got {value!r}"
        )
    return value


def check_number(
    name: str,
    value: object,
    *,
    low: float = 0.0,
    inclusive: bool = False,
    high: float = math.inf,
) -> float:
    """Check that ``value`` is a finite real number above ``low`` (or equal to it when
    ``inclusive``) and at most ``high``; return it as a float. Bools, NaN, ±inf and integers
    too large for a float are refused, so no float parameter turns into zeros or NaN."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    try:
        x = float(value) if real else math.nan
    except OverflowError:  # an int beyond the float range
        x = math.nan
    above = x >= low if inclusive else x > low
    if not (above and x <= high and math.isfinite(x)):
        bound = f"{'>=' if inclusive else '>'} {low:g}"
        bound += "" if high == math.inf else f" and <= {high:.3g}"
        raise ValueError(
            f"{name}: expected a finite number {bound}, got {value!r}"
        )
    return x


def resolve_scale(scale: float | None, head_dim: int) -> float:
    """``scale`` if given (a finite number > 0), else ``1/sqrt(head_dim)`` (head_dim >= 1)."""
    if scale is None:
        return check_positive_int("head_dim", head_dim) ** -0.5
    return check_number("scale", scale)


def check_score_range(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float | None,
    initial_state: torch.Tensor | None = None,
) -> None:
    """Check the scale (:func:`resolve_scale`) and that the scores s·q·k and reads s·q·S_0,
    at most s·Dk·max|q|·max(|k|, |S_0|), stay below √ of the largest float (1.8e19 in
    float32), leaving as much room again for sums over tokens: no overflow to inf or NaN."""
    s = resolve_scale(scale, q.shape[-1])
    given = [x.detach() for x in (q, k, initial_state) if x is not None]
    top = [x.norm(math.inf).item() for x in given]  # max |x| of each
    bound = s * q.shape[-1] * top[0] * max(top[1:])
    limit = torch.finfo(q.dtype).max ** 0.5
    if bound > limit:
        raise ValueError(
            f"scale, q, k: expected scores |s·q·k| <= {limit:.3g} (√ of {q.dtype}'s "
            f"largest number, so sums over tokens stay finite), got s·Dk·max|q|·max|k| "
            f"up to {bound:.3g} with scale s = {s:.3g}; lower the scale or q and k"
        )


def check_layer_input(
    x: torch.Tensor, d_model: int, weight: torch.Tensor
) -> tuple[int, int]:
    """Check a layer input x ``[B, T, d_model]`` with B, T >= 1 and finite values against the
    dtype and device of the layer; return (B, T). Errors name ``x``, the argument the caller
    passed."""
    sizes = check_tensor("x", x, ("B", "T", "d_model"), {"d_model": d_model})
    if 0 in (sizes["B"], sizes["T"]):
        raise ValueError(
            f"x: expected at least one token in at least one sequence (B, T >= 1), got "
            f"shape {tuple(x.shape)}"
        )
    if x.dtype != weight.dtype or x.device != weight.device:
        raise ValueError(
            f"x: expected {weight.dtype} on {weight.device} like the layer's "
            f"parameters, got {x.dtype} on {x.device}"
        )
    check_finite("x", x)
    return sizes["B"], sizes["T"]


def check_int_in(name: str, value: object, low: int, high: int) -> int:
    """Check that ``value`` is an int in [low, high] (bools rejected) and return it."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not low <= value <= high
    ):
        raise ValueError(
            f"{name}: expected an integer in [{low}, {high}], got {value!r}"
        )
    return value


def check_float_in(
    name: str, value: object, low: float, high: float
) -> float:
    """Check that ``value`` is a number in [low, high] (bools rejected); return it as a float."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not low <= value <= high
    ):
        raise ValueError(
            f"{name}: expected a number in [{low}, {high}], got {value!r}"
        )
    return float(value)

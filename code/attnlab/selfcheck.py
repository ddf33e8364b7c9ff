"""Self-checks: test your own implementation of a mechanism against the package's reference.

Each ``check_*`` takes your function, runs it on random and adversarial inputs (one token, two
tokens, huge scores, β = 0 and 1, gates near 0 and very negative, keys that are not unit length)
and compares it with the package's own kernel. It never raises at you: it returns a
:class:`CheckResult` whose ``message`` says what went wrong and what to look at, e.g. "off by a
factor √d_k: is the scale applied?". An exception inside your function becomes a diagnosis that
names it; ``raise NotImplementedError`` (the exercise stubs) reads "not implemented yet".

Whatever your function does, the check answers with a diagnosis, never a pass it did not earn and
never a crash: it gets copies of the inputs (changing them in place changes nothing the check
compares), ``sys.exit()`` and any exception it raises are reported (Ctrl-C / "interrupt the
kernel" still interrupts), and an answer that is complex, integer, half precision, on another
device (``meta``) or not a plain tensor is named as such. A function that does not return within
``time_limit`` seconds (:data:`TIME_LIMIT`, 25 by default) is stopped, and the diagnosis comes at
most a second later: the check runs in a daemon thread, which the notebook waits for. Python can
stop a thread only between two steps of Python code, so a function stuck inside one long call
(``time.sleep``, ``input()``, a huge matrix product) keeps running in the background; the
diagnosis says so and asks you to restart the kernel. A separate process could always be killed,
but it would not see the functions you defined in the notebook, nor show what they print.

Signatures your function must have (the package's conventions: tensors ``[B, H, T, D]``, a state
``[B, H, Dk, Dv]`` read as ``o = Sᵀ q``, log-gates ``g = log α ≤ 0``, scale 1/√Dk on q):

- ``check_attention(fn)``: ``fn(q, k, v) -> o``, no mask; q ``[B, H, Tq, Dk]``,
  k ``[B, H, Tk, Dk]``, v ``[B, H, Tk, Dv]`` -> o ``[B, H, Tq, Dv]``.
- ``check_causal_attention(fn)``: ``fn(q, k, v) -> o``, token i sees keys j ≤ i; all ``T`` long.
- ``check_multi_head_attention(fn)``: ``fn(x, w_q, w_k, w_v, w_o, n_heads) -> y``, causal
  multi-head attention: x ``[B, T, d]``, each ``w_*`` ``[d, d]`` applied as ``x @ w``, H = n_heads
  heads of width d / H, y ``[B, T, d]``.
- ``check_decode_step(fn)``: ``fn(q_t, k_t, v_t, cache) -> o_t`` with q_t, k_t ``[B, H, 1, Dk]``,
  v_t ``[B, H, 1, Dv]`` and ``cache`` a :class:`~attnlab.kv_cache.KVCache` of the past tokens;
  append the new token to the cache, return o_t ``[B, H, 1, Dv]``.
- ``check_prenorm_block(fn)``: ``fn(x, mixer, mlp, mixer_norm, mlp_norm) -> y``, one
  pre-norm residual block; x ``[B, T, d]`` and each argument a function ``[B, T, d] -> [B, T, d]``.
- ``check_linear_attention_step(fn)``: ``fn(q, k, v, *, state) -> (o, new_state)``;
  q, k ``[B, H, Dk]``, v ``[B, H, Dv]``, state ``[B, H, Dk, Dv]``: S ← S + k vᵀ, o = Sᵀ q.
- ``check_gla_step(fn)``: ``fn(q, k, v, *, g, state) -> (o, new_state)`` with g
  ``[B, H, Dk]``: S ← Diag(exp g) S + k vᵀ (gated linear attention, one decay per key channel).
- ``check_linear_chunk(fn)``: ``fn(q, k, v, *, state) -> (o, new_state)`` for one chunk of C
  tokens of chunkwise linear attention: q, k ``[B, H, C, Dk]``, v ``[B, H, C, Dv]``:
  O = s Q S + (s Q Kᵀ ⊙ M) V and S ← S + Kᵀ V (M the causal mask inside the chunk).
- ``check_delta_chunk(fn)``: ``fn(q, k, v, *, beta, state) -> (o, new_state)`` for one chunk of
  the delta rule (Lesson 13's WY / UT form); beta ``[B, H, C]``.
- ``check_delta_step(fn)``: ``fn(q, k, v, *, beta, state)`` with beta ``[B, H]``.
- ``check_gated_delta_step(fn)``: ``fn(q, k, v, *, g, beta, state)`` with g ``[B, H]``.
- ``check_kda_step(fn)``: ``fn(q, k, v, *, g, beta, state)`` with g ``[B, H, Dk]``
  (the signature of :func:`attnlab.kda.kda_step`).

Returning ``(o, extra)`` instead of ``o`` is accepted where one tensor is expected.
"""

from __future__ import annotations

import contextvars
import ctypes
import html
import inspect
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import attention
from ._selfcheck_mistakes import (
    attention_mistakes,
    block_mistakes,
    chunk_mistakes,
    chunk_state_mistakes,
    decode_mistakes,
    delta_chunk_mistakes,
    multi_head_mistakes,
    step_mistakes,
)
from .attention import merge_heads, split_heads
from .blocks import RMSNorm
from .delta import (
    delta_rule_chunk_reference,
    delta_rule_recurrent,
    delta_rule_step,
    gated_delta_rule_recurrent,
    gated_delta_rule_step,
)
from .gated import gla_recurrent, gla_step
from .i18n import language_blocks, tr
from .kda import kda_recurrent
from .kv_cache import KVCache
from .linear import (
    linear_attention_chunk_reference,
    linear_attention_recurrent,
    linear_attention_step,
)

RTOL, ATOL = 1e-3, 1e-4

#: Seconds a check waits for your function before it stops it (every ``check_*`` takes
#: ``time_limit=`` to change it).
TIME_LIMIT = 25.0

#: The answers a check compares: real floating point, as the inputs (float32) or wider.
_REAL_DTYPES = (torch.float32, torch.float64)


@dataclass(frozen=True)
class CheckResult:
    """What a checker found: ``ok``, a readable ``message``, and ``mistake``, a short name of the
    diagnosed mistake (``None`` when it passed or the mistake is not one the checker knows)."""

    name: str
    ok: bool
    message: str
    mistake: str | None = None
    #: the cases a passing check compared (they make its message in every language)
    cases: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"{'✓' if self.ok else '✗'} {self.name}: {self.message}"

    def written(self) -> tuple[str, str, str]:
        """(verdict, name, message) in the current language (``attnlab.i18n``); a diagnosis
        not yet in the language's catalog stays English."""
        verdict = tr("✓ passed") if self.ok else tr("✗ not yet")
        message = (
            tr("matches the package's reference in all {n} cases ({cases}).",
               n=len(self.cases), cases=tr("; ").join(tr(case) for case in self.cases))
            if self.ok and self.cases
            else tr(self.message)
        )
        return verdict, tr(self.name), message

    def _repr_markdown_(self) -> str:
        verdict, name, message = self.written()
        return f"**{verdict}** · *{name}* · {message}"

    def _repr_html_(self) -> str:
        """The verdict in every language the book is built in."""

        def html_written() -> str:
            verdict, name, message = (html.escape(part) for part in self.written())
            return f"<p><strong>{verdict}</strong> · <em>{name}</em> · {message}</p>"

        return language_blocks(html_written)


class _Failed(Exception):
    """Raised inside a checker to stop at the first diagnosis."""

    def __init__(self, message: str, mistake: str | None = None):
        super().__init__(message)
        self.message, self.mistake = message, mistake


class _Ambiguous(_Failed):
    """Several known mistakes explain this output; a later token may tell them apart."""


class _TimeUp(BaseException):
    """Raised inside the check's thread to stop a function past its time limit (a
    BaseException, so that ``except Exception`` in the learner's code does not swallow it)."""


@dataclass
class _Progress:
    """Where a running check is: the case at hand, and whether the learner's function runs."""

    label: str = ""
    in_learner: bool = False


_here = threading.local()  # the _Progress of the check running in this thread


class _Label(str):
    """A case's label made of parts ("six steps, token 3"): the English string (the check's
    logic reads it, e.g. ``"large" in label``), and ``local()``, the label written in the
    current language."""

    local: Callable[[], str]

    def __new__(cls, english: str, local: Callable[[], str]) -> _Label:
        label = super().__new__(cls, english)
        label.local = local
        return label


def _local(label: str) -> str:
    """A case's label (English) as a diagnosis in the current language writes it."""
    return label.local() if isinstance(label, _Label) else tr(label)


def _call(
    fn: Callable,
    label: str,
    *args,
    hint: str = "",
    unchanged: str | None = None,
    **kwargs,
):
    """Call the learner's function on copies of the tensors (so changing them in place changes
    nothing the check compares); turn whatever it raises into a diagnosis (plus ``hint``).
    ``unchanged`` names a keyword argument the function must not change in place."""
    args = tuple(_copy(a) for a in args)
    kwargs = {name: _copy(value) for name, value in kwargs.items()}
    given = kwargs[unchanged].clone() if unchanged else None
    progress = getattr(_here, "progress", _Progress())
    progress.label, progress.in_learner = label, True
    try:
        out = fn(*args, **kwargs)
    except (KeyboardInterrupt, _TimeUp):
        raise
    except NotImplementedError:
        raise _Failed(
            tr("not implemented yet: replace `raise NotImplementedError` with your code, "
               "then run this cell again."),
            "not_implemented",
        ) from None
    except SystemExit:
        raise _Failed(
            tr("your function called sys.exit() ({label}): it would end the program, so "
               "the check stopped it. Return the answer instead.", label=_local(label)),
            "exit",
        ) from None
    except BaseException as error:  # noqa: BLE001 - every learner error becomes a diagnosis
        described = _describe(error)  # safe even when str(error) raises
        raised = tr("your function raised {error} ({label})", error=described,
                    label=_local(label))
        if _uses_dot_t(fn):
            raise _Failed(
                tr("{raised}. Your code uses .T, which reverses *all* the axes of a "
                   "tensor: k.T of k [B, H, T, D] is [D, T, H, B]. To swap the last "
                   "two axes only, write k.transpose(-2, -1) or k.mT.", raised=raised),
                "dot_T",
            ) from None
        if "must match the size of tensor" in described:
            raise _Failed(
                tr("{raised}: two tensors did not line up. A reduction without "
                   "keepdim=True (scores.amax(dim=-1), .sum(-1), "
                   ".max(dim=-1).values) drops its axis, and the result then lines up "
                   "against the wrong one: keep it with keepdim=True.", raised=raised) + hint,
                "broadcast",
            ) from None
        raise _Failed(
            tr("{raised}. Compare the shapes of "
               "your tensors with the ones in the docstring.", raised=raised) + hint,
            "exception",
        ) from None
    finally:
        progress.in_learner = False
    if unchanged and not torch.equal(kwargs[unchanged], given):
        raise _Failed(
            tr("your function changed the {argument} it was given, in place ({label}): "
               "return a new tensor instead (state = state + …, not +=).",
               argument=unchanged, label=_local(label)),
            "in_place",
        )
    return out


def _uses_dot_t(fn: Callable) -> bool:
    """Does the source of ``fn`` (when Python can find it) use ``.T`` on something?"""
    try:
        source = inspect.getsource(fn)
    except Exception:  # noqa: BLE001 - no source to read (builtins, odd callables)
        return False
    return re.search(r"[\w\)\]]\.T\b", source) is not None


def _copy(value: object) -> object:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _describe(error: BaseException) -> str:
    """ "TypeError: its message", even when the exception's ``__str__`` fails."""
    kind = type(error).__name__
    try:
        text = str(error)
    except (KeyboardInterrupt, _TimeUp):
        raise
    except BaseException as inner:  # noqa: BLE001 - a broken __str__ is the learner's too
        text = tr("(its message cannot be shown: its __str__ raised {kind})",
                  kind=type(inner).__name__)
    if len(text) > 300:
        text = text[:300] + " …"
    return f"{kind}: {text}" if text else kind


def _tensor(
    out: object, what: str, shape: tuple[int, ...], dims: str
) -> torch.Tensor:
    """The learner's tensor (the first element of a tuple), checked for type, device,
    dtype and shape: a real floating-point CPU tensor, as the inputs."""
    if isinstance(out, tuple | list) and out:
        out = out[0]
    # what and dims are English (e.g. "the output", "[B, H, Tq, Dv]"), written here in the
    # current language
    what, dims = tr(what), tr(dims)
    if not isinstance(out, torch.Tensor):
        raise _Failed(
            tr("{what}: expected a tensor {dims}, got {kind}.",
               what=what, dims=dims, kind=type(out).__name__),
            "type",
        )
    if type(out) not in (torch.Tensor, torch.nn.Parameter):
        raise _Failed(
            tr("{what} is a {kind}, a subclass of torch.Tensor with its "
               "own rules: return a plain torch.Tensor.", what=what, kind=type(out).__name__),
            "type",
        )
    if out.is_nested or out.layout != torch.strided:
        kind = tr("nested") if out.is_nested else str(out.layout)
        raise _Failed(
            tr("{what} is a {kind} tensor: return an ordinary (dense) tensor {dims}.",
               what=what, kind=kind, dims=dims),
            "layout",
        )
    if out.device.type == "meta":
        raise _Failed(
            tr("{what} is on the meta device: it has a shape but no values. Compute it "
               "from the inputs (they are on the CPU), without device='meta'.", what=what),
            "device",
        )
    if out.device.type != "cpu":
        raise _Failed(
            tr("{what} is on {device}, the inputs on the CPU: compute it where the "
               "inputs are (or move it back with .cpu()).", what=what, device=out.device),
            "device",
        )
    if out.is_complex():
        raise _Failed(
            tr("{what} is complex ({dtype}), the answer is real: look for a complex "
               "number that got in (a square root of a negative number, torch.fft, "
               "1j) and keep the computation real.", what=what, dtype=out.dtype),
            "dtype",
        )
    if out.dtype not in _REAL_DTYPES:
        kind = (
            tr("half precision, which keeps too few digits")
            if out.is_floating_point()
            else tr("not floating point: the answer has fractions")
        )
        raise _Failed(
            tr("{what} has dtype {dtype}, {kind}. Keep the inputs' dtype "
               "(torch.float32): no .long(), .int(), .round() or .half().",
               what=what, dtype=out.dtype, kind=kind),
            "dtype",
        )
    if tuple(out.shape) != shape:
        raise _Failed(
            tr("{what} has shape {shape}, expected {expected} {dims}.",
               what=what, shape=tuple(out.shape), expected=shape, dims=dims),
            "shape",
        )
    return out


def _output_and_state(
    out: object,
    label: str,
    o_shape: tuple[int, ...],
    o_dims: str,
    state_shape: tuple[int, int],
    state_dims: str = "[B, H, Dk, Dv]",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's pair (o, new_state), each checked for type and shape
    (the state ``[B, H, *state_shape]`` with B = 1, H = 2, as every case)."""
    if not (isinstance(out, tuple | list) and len(out) == 2):
        raise _Failed(
            tr("expected the pair (o, new_state), got {kind} ({label}).",
               kind=type(out).__name__, label=_local(label)),
            "type",
        )
    o = _tensor(out[0], "o", o_shape, o_dims)
    return o, _tensor(
        out[1], "the new state", (1, 2, *state_shape), state_dims
    )


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.double(), b.double(), rtol=RTOL, atol=ATOL
    )


def _close_or_same_nonfinite(out: torch.Tensor, wrong: torch.Tensor) -> bool:
    """Close where both are finite, NaN where both are NaN, the same inf where both are."""
    if out.shape != wrong.shape:
        return False
    a, b = out.double(), wrong.double()
    finite = torch.isfinite(a)
    same_pattern = torch.equal(finite, torch.isfinite(b)) and torch.equal(
        a.isnan(), b.isnan()
    )
    return (
        same_pattern
        and torch.equal(a[a.isinf()], b[b.isinf()])
        and torch.allclose(a[finite], b[finite], rtol=RTOL, atol=ATOL)
    )


def _diagnose(
    out: torch.Tensor,
    ref: torch.Tensor,
    label: str,
    mistakes: dict[str, tuple[Callable[[], torch.Tensor], str]],
    fallback: str,
) -> None:
    """Raise the diagnosis of the first known mistake ``out`` reproduces, else ``fallback``.
    A mistake that produces NaN or inf matches where it does, and is close elsewhere."""
    matches = []
    for mistake, (make, diagnosis) in mistakes.items():
        try:
            wrong = make()
        except (
            RuntimeError,
            ValueError,
        ):  # the mistake cannot be formed for these shapes
            continue
        if _close_or_same_nonfinite(out, wrong):
            matches.append(_Failed(
                tr("{diagnosis} ({label})", diagnosis=diagnosis, label=_local(label)),
                mistake,
            ))
    if len(matches) == 1:
        raise matches[0]
    if matches:
        raise _Ambiguous(
            tr("one of these: {options}",
               options=tr(" Or: ").join(m.message for m in matches))
        )
    if not torch.isfinite(out).all():
        raise _Failed(
            tr("NaN or inf in your output ({label}); the reference is finite. {advice}",
               label=_local(label),
               advice=(
                   tr("Subtract each row's maximum score before exp (exp overflows).")
                   if "large" in label
                   else fallback
               )),
            "nonfinite",
        )
    error = (out.double() - ref.double()).abs().max().item()
    raise _Failed(
        tr("differs from the reference by up to {error:.3g} ({label}). {fallback}",
           error=error, label=_local(label), fallback=fallback)
    )


def _diagnose_later(pending: list[_Failed], *args) -> None:
    """``_diagnose``, but an ambiguous diagnosis is kept in ``pending`` while later tokens run."""
    try:
        _diagnose(*args)
    except _Ambiguous as ambiguous:
        pending.append(ambiguous)


def _raise_pending(pending: list[_Failed]) -> None:
    if pending:
        raise _Failed(pending[0].message)


def _run(
    name: str, fn: object, body: Callable[[], list[str]], time_limit: float
) -> CheckResult:
    """Run one check in a daemon thread and wait at most ``time_limit`` seconds for it."""
    if not callable(fn):
        return CheckResult(
            name,
            False,
            tr("expected your function itself, got {kind}: pass it "
               "without calling it, e.g. check(my_function), not check(my_function(…)).",
               kind=type(fn).__name__),
            "not_callable",
        )
    progress, outcome = _Progress(), {}
    context = (
        contextvars.copy_context()
    )  # so what the function prints shows in this cell

    def work() -> None:
        _here.progress = progress
        try:
            outcome["result"] = context.run(_verdict, name, body)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = error

    worker = threading.Thread(
        target=work, name=f"self-check: {name}", daemon=True
    )
    deadline = time.monotonic() + time_limit
    try:  # start inside: an interrupt during start() must not orphan it
        worker.start()
        while worker.is_alive() and time.monotonic() < deadline:
            worker.join(min(0.05, max(deadline - time.monotonic(), 0.0)))
    except BaseException:  # the reader interrupted the kernel: stop it too
        _stop(worker)
        raise
    if worker.is_alive():
        return _timed_out(name, worker, progress, time_limit)
    if isinstance(outcome.get("error"), KeyboardInterrupt):
        raise outcome[
            "error"
        ]  # the function raised it: an interrupt is never a diagnosis
    return outcome["result"]


def _verdict(name: str, body: Callable[[], list[str]]) -> CheckResult:
    try:
        labels = body()
    except _Failed as failed:
        return CheckResult(name, False, failed.message, failed.mistake)
    except Exception as error:  # noqa: BLE001 - an answer the check could not read
        where = _here.progress.label
        return CheckResult(
            name,
            False,
            tr("the check could not read your answer{where}: "
               "{error}. Return what the docstring asks for, computed from "
               "the inputs: a plain float32 tensor (or the pair (o, new_state)).",
               where=tr(" ({case})", case=_local(where)) if where else "",
               error=_describe(error)),
            "unreadable",
        )
    return CheckResult(
        name,
        True,
        tr("matches the package's reference in all {n} cases ({cases}).",
           n=len(labels), cases=tr("; ").join(_local(label) for label in labels)),
        cases=tuple(labels),
    )


def _timed_out(
    name: str, worker: threading.Thread, progress: _Progress, limit: float
) -> CheckResult:
    where = tr(" ({case})", case=_local(progress.label)) if progress.label else ""
    what = (
        tr("your function did not return within {limit:g} s{where}", limit=limit, where=where)
        if progress.in_learner
        else tr("the check did not finish within {limit:g} s{where}", limit=limit, where=where)
    )
    if _stop(worker):
        advice = tr(
            "it was stopped. Look for a loop that never ends (a while loop whose "
            "condition stays true); the checks use a few tokens, so a correct answer "
            "takes well under a second."
        )
    else:
        advice = tr(
            "it is still running in the background, inside a call Python cannot "
            "interrupt (time.sleep, input(), a huge computation). Restart the kernel "
            "(Kernel → Restart) to stop it, then run your cells again."
        )
    return CheckResult(name, False, tr("{problem}: {advice}", problem=what, advice=advice),
                       "timeout")


def _stop(worker: threading.Thread, grace: float = 1.0) -> bool:
    """Raise :class:`_TimeUp` inside ``worker`` (again while it survives, for up to
    ``grace`` seconds); True when it ended. Python delivers it at the thread's next step
    of Python code."""
    set_async_exc = getattr(
        getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None
    )
    deadline = time.monotonic() + grace
    while worker.is_alive() and time.monotonic() < deadline:
        if set_async_exc is not None and worker.ident is not None:
            set_async_exc(
                ctypes.c_ulong(worker.ident), ctypes.py_object(_TimeUp)
            )
        worker.join(0.1)
    return not worker.is_alive()


def _randn(
    gen: torch.Generator, *shape: int, std: float = 1.0
) -> torch.Tensor:
    return std * torch.randn(*shape, generator=gen)


# --- softmax attention -------------------------------------------------------------------------


def _attention_cases(
    causal: bool,
) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    shapes = [
        ("random inputs, T = 5", 5, 5),
        ("T = 1", 1, 1),
        ("T = 2", 2, 2),
    ]
    if not causal:
        shapes.append(("3 queries, 7 keys", 3, 7))
    cases = [
        (
            label,
            _randn(gen, 2, 2, tq, 8),
            _randn(gen, 2, 2, tk, 8),
            _randn(gen, 2, 2, tk, 6),
        )
        for label, tq, tk in shapes
    ]
    cases.append(
        (
            "large scores (about ±1000), T = 6",
            _randn(gen, 1, 2, 6, 8, std=12.0),
            _randn(gen, 1, 2, 6, 8, std=12.0),
            _randn(gen, 1, 2, 6, 6),
        )
    )
    return cases


def _check_attention_fn(fn: Callable, causal: bool) -> list[str]:
    cases = _attention_cases(causal)
    for label, q, k, v in cases:
        ref, _ = attention.softmax_attention(q, k, v, causal=causal)
        out = _tensor(
            _call(fn, label, q, k, v),
            "the output",
            tuple(ref.shape),
            "[B, H, Tq, Dv]",
        )
        if _close(out, ref):
            continue
        fallback = tr("Compare with o = softmax(q kᵀ / √d_k) v.")
        if causal:
            t = q.shape[2]
            first_bad = not torch.isfinite(out[:, :, 0]).all()
            if t > 1 and first_bad and torch.isfinite(out[:, :, 1:]).all():
                raise _Failed(
                    tr("NaN in the first token's output only ({label}): it has no "
                       "allowed key. A token must see itself: keep the diagonal, "
                       "j ≤ i.", label=_local(label)),
                    "mask_strict",
                )
            if _changes_with_future(fn, q, k, v, label):
                fallback = tr(
                    "Future tokens change the output: the mask is missing or transposed."
                )
        _diagnose(
            out, ref, label, attention_mistakes(q, k, v, causal), fallback
        )
    return [case[0] for case in cases]


def _changes_with_future(fn: Callable, q, k, v, label: str) -> bool:
    """Does changing the last token's key and value change any earlier output?"""
    k2, v2 = k.clone(), v.clone()
    k2[:, :, -1] += 3.0
    v2[:, :, -1] += 3.0
    shape, dims = tuple(v.shape), "[B, H, T, Dv]"
    before = _tensor(_call(fn, label, q, k, v), "the output", shape, dims)
    after = _tensor(_call(fn, label, q, k2, v2), "the output", shape, dims)
    return not _close(before[:, :, :-1], after[:, :, :-1])


def check_attention(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v) -> o``: softmax(q kᵀ/√d_k) v without a mask (see the module doc)."""
    return _run(
        "scaled dot-product attention",
        fn,
        lambda: _check_attention_fn(fn, causal=False),
        time_limit,
    )


def check_causal_attention(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v) -> o``: causal attention, token i sees keys j ≤ i."""
    return _run(
        "causal attention",
        fn,
        lambda: _check_attention_fn(fn, causal=True),
        time_limit,
    )


# --- multi-head attention ------------------------------------------------------------------------


def _check_multi_head(fn: Callable) -> list[str]:
    gen = torch.Generator().manual_seed(5)
    cases = [
        ("2 heads, T = 5", 2, 5),
        ("4 heads, T = 3", 4, 3),
        ("T = 1, 2 heads", 2, 1),
    ]
    for label, heads, t in cases:
        x = _randn(gen, 2, t, 8)
        weights = [_randn(gen, 8, 8, std=8**-0.5) for _ in range(4)]
        ref = reference_multi_head_attention(x, *weights, heads)
        out = _tensor(
            _call(fn, label, x, *weights, heads),
            "y",
            tuple(ref.shape),
            "[B, T, d]",
        )
        if not _close(out, ref):
            _diagnose(
                out,
                ref,
                label,
                multi_head_mistakes(x, *weights, heads),
                tr("Compare with Y = [O_1 … O_H] W_O, "
                   "O_h = softmax(Q_h K_hᵀ / √d_h + log M) V_h."),
            )
    return [case[0] for case in cases]


def check_multi_head_attention(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(x, w_q, w_k, w_v, w_o, n_heads) -> y``: causal multi-head attention."""
    return _run(
        "multi-head attention", fn, lambda: _check_multi_head(fn), time_limit
    )


# --- one decoding step with a KV cache ---------------------------------------------------------


def _check_decode(fn: Callable) -> list[str]:
    gen = torch.Generator().manual_seed(1)
    cases = [
        ("one step from an empty cache", 0, 1, 1.0),
        ("two steps", 0, 2, 1.0),
        ("six steps", 0, 6, 1.0),
        ("three steps after a prefix of 4 cached tokens", 4, 3, 1.0),
        ("large scores, six steps", 0, 6, 12.0),
    ]
    pending: list[_Failed] = []
    for label, prefix, steps, std in cases:
        q, k = (
            _randn(gen, 1, 2, prefix + steps, 8, std=std) for _ in range(2)
        )
        v = _randn(gen, 1, 2, prefix + steps, 6)
        ref, _ = attention.softmax_attention(q, k, v, causal=True)
        cache = KVCache(k[:, :, :prefix].clone(), v[:, :, :prefix].clone())
        for t in range(prefix, prefix + steps):
            step = _Label(
                f"{label}, token {t + 1}",
                lambda label=label, n=t + 1: tr("{case}, token {n}", case=tr(label), n=n),
            )
            before = _cached_tokens(cache, step)
            hint = (
                tr(" The cache was empty before this step: append (k_t, v_t) before attending.")
                if before == 0
                else ""
            )
            now = slice(t, t + 1)
            out = _tensor(
                _call(
                    fn,
                    step,
                    q[:, :, now],
                    k[:, :, now],
                    v[:, :, now],
                    cache,
                    hint=hint,
                ),
                "o_t",
                (1, 2, 1, 6),
                "[B, H, 1, Dv]",
            )
            after = _cached_tokens(cache, step)
            if after != before + 1:
                raise _Failed(
                    tr("the cache held {before} tokens before the step and {after} "
                       "after ({label}): append the new (k_t, v_t) exactly once, with "
                       "cache.append(k_t, v_t).", before=before, after=after,
                       label=_local(step)),
                    "cache_length",
                )
            if _close(out, ref[:, :, now]):
                continue
            mistakes = decode_mistakes(
                q[:, :, now], k[:, :, : t + 1], v[:, :, : t + 1]
            )
            _diagnose_later(
                pending,
                out,
                ref[:, :, now],
                step,
                mistakes,
                tr("Compare with o_t = softmax(K q_t / √d_k)ᵀ V over the whole cache."),
            )
    _raise_pending(pending)
    return [case[0] for case in cases]


def _cached_tokens(cache: KVCache, step: str) -> int:
    """How many tokens the cache holds, after checking the learner left it a cache:
    keys ``[1, 2, T, 8]`` and values ``[1, 2, T, 6]`` on the CPU."""
    k, v = getattr(cache, "k", None), getattr(cache, "v", None)
    if not (
        type(k) is torch.Tensor
        and type(v) is torch.Tensor
        and k.device.type == v.device.type == "cpu"
        and k.dim() == v.dim() == 4
        and k.shape[2] == v.shape[2]
        and (k.shape[3], v.shape[3]) == (8, 6)
    ):
        raise _Failed(
            tr("your function replaced the cache's tensors: cache.k is "
               "{k} and cache.v is {v} ({label}). Leave them to the "
               "cache: add the new token with cache.append(k_t, v_t) and read "
               "cache.k and cache.v.", k=_what(k), v=_what(v), label=_local(step)),
            "cache_broken",
        )
    return k.shape[2]


def _what(x: object) -> str:
    if type(x) is torch.Tensor:
        return tr("a {device} tensor of shape {shape}", device=x.device.type,
                  shape=tuple(x.shape))
    return "None" if x is None else tr("a {kind}", kind=type(x).__name__)


def check_decode_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q_t, k_t, v_t, cache) -> o_t``: append to the KV cache, attend over it."""
    return _run(
        "cached decode step", fn, lambda: _check_decode(fn), time_limit
    )


# --- one pre-norm residual block ---------------------------------------------------------------


def _block_parts(gen: torch.Generator, d: int) -> tuple[Callable, ...]:
    """A mixer, an MLP and two RMSNorms with random weights, as plain functions."""
    w_mix, w_in, w_out = (_randn(gen, d, d, std=d**-0.5) for _ in range(3))
    norms = [RMSNorm(d) for _ in range(2)]
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(0.5 + torch.rand(d, generator=gen))

    def mixer(
        h: torch.Tensor,
    ) -> torch.Tensor:  # mixes positions, as attention does
        return torch.tanh(h @ w_mix).cumsum(dim=1)

    def mlp(h: torch.Tensor) -> torch.Tensor:
        return torch.relu(h @ w_in) @ w_out

    def mixer_norm(h: torch.Tensor) -> torch.Tensor:
        return norms[0](h).detach()

    def mlp_norm(h: torch.Tensor) -> torch.Tensor:
        return norms[1](h).detach()

    return mixer, mlp, mixer_norm, mlp_norm


def _check_block(fn: Callable) -> list[str]:
    gen = torch.Generator().manual_seed(2)
    cases = [
        ("random inputs, T = 5", 2, 5, 1.0),
        ("T = 1", 1, 1, 1.0),
        ("a large stream (|x| ≈ 30)", 1, 4, 30.0),
    ]
    for label, b, t, std in cases:
        x = _randn(gen, b, t, 8, std=std)
        parts = _block_parts(gen, 8)
        ref = reference_prenorm_block(x, *parts)
        out = _tensor(
            _call(fn, label, x, *parts),
            "the output",
            tuple(ref.shape),
            "[B, T, d]",
        )
        if not _close(out, ref):
            _diagnose(
                out,
                ref,
                label,
                block_mistakes(x, *parts),
                tr("Compare with h = x + Mixer(RMSNorm₁(x)); y = h + MLP(RMSNorm₂(h))."),
            )
    return [case[0] for case in cases]


def check_prenorm_block(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(x, mixer, mlp, mixer_norm, mlp_norm) -> y``: one pre-norm residual block."""
    return _run(
        "pre-norm residual block", fn, lambda: _check_block(fn), time_limit
    )


# --- one chunk: chunkwise linear attention (Lesson 8) and the delta rule (Lesson 13) ------------


def _check_chunk(fn: Callable, delta: bool) -> list[str]:
    """Run ``fn`` on single chunks and compare with the recurrence over the
    same tokens: outputs first, then the state the chunk hands on."""
    gen = torch.Generator().manual_seed(4)
    cases = [
        ("a chunk of 4 from an empty state", 4, False),
        ("a chunk of 1 from a random state", 1, True),
        ("a chunk of 6 from a random state", 6, True),
    ]
    for label, c, random_state in cases:
        q, k, v = (
            _randn(gen, 1, 2, c, 6),
            _randn(gen, 1, 2, c, 6),
            _randn(gen, 1, 2, c, 4),
        )
        if delta:  # unit keys keep the delta rule stable
            k = torch.nn.functional.normalize(k, dim=-1)
        state = (
            _randn(gen, 1, 2, 6, 4)
            if random_state
            else torch.zeros(1, 2, 6, 4)
        )
        extra = {"beta": torch.rand(1, 2, c, generator=gen)} if delta else {}
        recurrence = (
            delta_rule_recurrent if delta else linear_attention_recurrent
        )
        ref_o, ref_state = recurrence(
            q, k, v, **extra, initial_state=state, output_final_state=True
        )
        out = _call(
            fn, label, q, k, v, **extra, state=state, unchanged="state"
        )
        o, new_state = _output_and_state(
            out, label, (1, 2, c, 4), "[B, H, C, Dv]", (6, 4)
        )
        if delta:
            outputs = delta_chunk_mistakes(q, k, v, extra["beta"], state, 0)
            states = delta_chunk_mistakes(q, k, v, extra["beta"], state, 1)
            formulas = (
                "O = s Q S + (s Q Kᵀ ⊙ M) V_new, V_new = U − W S",
                "S + Kᵀ V_new",
            )
        else:
            outputs, states = (
                chunk_mistakes(q, k, v, state),
                chunk_state_mistakes(k, v, state),
            )
            formulas = ("O = s Q S + (s Q Kᵀ ⊙ M) V", "S + Kᵀ V")
        if not _close(o, ref_o):
            _diagnose(
                o, ref_o, label, outputs, tr("Compare with {formula}.", formula=formulas[0])
            )
        if not _close(new_state, ref_state):
            _diagnose(
                new_state,
                ref_state,
                label,
                states,
                tr("The outputs match; compare the new state with {formula}.",
                   formula=formulas[1]),
            )
    return [case[0] for case in cases]


def check_linear_chunk(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, state) -> (o, new_state)``: one chunk of
    chunkwise linear attention, O = s Q S + (s Q Kᵀ ⊙ M) V, S ← S + Kᵀ V."""
    return _run(
        "one chunk of linear attention",
        fn,
        lambda: _check_chunk(fn, delta=False),
        time_limit,
    )


def check_delta_chunk(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, beta, state) -> (o, new_state)``: one chunk of the delta rule."""
    return _run(
        "one chunk of the delta rule",
        fn,
        lambda: _check_chunk(fn, delta=True),
        time_limit,
    )


# --- recurrent steps: linear attention, delta rule, gated delta rule, KDA --------------------

_ROW_GATE_HINT = (
    " The gate g [B, H, Dk] decays the state's rows (Dk): "
    "g.exp()[..., :, None] * state."
)
_HINTS = {"kda": _ROW_GATE_HINT, "gla": _ROW_GATE_HINT}
_GATED_KINDS = ("gated", "kda", "gla")
_ADDITIVE_KINDS = ("linear", "gla")  # no β, no correction: S ← S' + k vᵀ
_PER_CHANNEL_KINDS = ("kda", "gla")  # g [B, H, Dk]: one decay per key channel


def _step_cases(kind: str) -> list[dict]:
    """Sequences of (q, k, v, beta, g) with the starting state; adversarial ones by name."""
    gen = torch.Generator().manual_seed(2)
    specs = [
        ("one token from an empty state", 1, False, {}),
        ("two tokens from an empty state", 2, False, {}),
        ("six tokens from a random state", 6, True, {}),
    ]
    if kind not in _ADDITIVE_KINDS:
        specs += [
            ("β = 0", 4, True, {"beta": 0.0}),
            ("β = 1", 4, True, {"beta": 1.0}),
            ("keys of length 1.4", 4, True, {"key_norm": 1.4}),
        ]
    if kind in _GATED_KINDS:
        specs += [
            ("gates g = 0 (no decay)", 4, True, {"g": 0.0}),
            ("very negative gates g = -30", 4, True, {"g": -30.0}),
        ]
    cases = []
    for label, t, random_state, extra in specs:
        dk, dv = (4, 4) if kind == "kda" and "random" in label else (6, 4)
        q, k = _randn(gen, 1, 2, t, dk), _randn(gen, 1, 2, t, dk)
        k = extra.get("key_norm", 1.0) * k / k.norm(dim=-1, keepdim=True)
        beta = (
            torch.full((1, 2, t), extra["beta"])
            if "beta" in extra
            else torch.rand(1, 2, t, generator=gen)
        )
        gate_shape = (
            (1, 2, t, dk) if kind in _PER_CHANNEL_KINDS else (1, 2, t)
        )
        g = (
            torch.full(gate_shape, extra["g"])
            if "g" in extra
            else -torch.rand(*gate_shape, generator=gen)
        )
        state = (
            _randn(gen, 1, 2, dk, dv, std=0.5)
            if random_state
            else torch.zeros(1, 2, dk, dv)
        )
        cases.append(
            dict(
                label=label,
                q=q,
                k=k,
                v=_randn(gen, 1, 2, t, dv),
                beta=beta,
                g=g,
                state=state,
            )
        )
    return cases


def _reference(kind: str, c: dict) -> tuple[torch.Tensor, torch.Tensor]:
    args = (c["q"], c["k"], c["v"])
    common = dict(initial_state=c["state"], output_final_state=True)
    if kind == "linear":
        return linear_attention_recurrent(*args, **common)
    if kind == "gla":
        return gla_recurrent(*args, g=c["g"], **common)
    if kind == "delta":
        return delta_rule_recurrent(*args, beta=c["beta"], **common)
    if kind == "gated":
        return gated_delta_rule_recurrent(
            *args, g=c["g"], beta=c["beta"], **common
        )
    return kda_recurrent(*args, g=c["g"], beta=c["beta"], **common)


def _check_steps(fn: Callable, kind: str) -> list[str]:
    cases = _step_cases(kind)
    pending: list[_Failed] = []
    for c in cases:
        ref_o, _ = _reference(kind, c)
        state = c["state"].clone()
        _, _, t, dk = c["q"].shape
        dv = c["v"].shape[-1]
        for i in range(t):
            label = _Label(
                f"{c['label']}, token {i + 1} of {t}",
                lambda case=c["label"], i=i + 1, n=t: tr(
                    "{case}, token {i} of {n}", case=tr(case), i=i, n=n
                ),
            )
            q, k, v, beta, g = (
                c[n][:, :, i] for n in ("q", "k", "v", "beta", "g")
            )
            if kind in _ADDITIVE_KINDS:
                beta = torch.ones_like(beta)
            kwargs = {"state": state}
            if kind not in _ADDITIVE_KINDS:
                kwargs["beta"] = beta
            if kind in _GATED_KINDS:
                kwargs["g"] = g
            out = _call(
                fn,
                label,
                q,
                k,
                v,
                hint=tr(_HINTS[kind]) if kind in _HINTS else "",
                unchanged="state",
                **kwargs,
            )
            o, new_state = _output_and_state(
                out,
                label,
                (1, 2, dv),
                "[B, H, Dv]: the read is Sᵀ q",  # written in the reader's language by _tensor
                (dk, dv),
                "[B, H, Dk, Dv]: the write is k vᵀ (k a column, v a row)",
            )
            if not _close(o, ref_o[:, :, i]):
                mistakes = step_mistakes(kind, q, k, v, beta, g, state)
                where = (
                    tr("matches up to token {i} but diverges at token {j}: ", i=i, j=i + 1)
                    if i > 0
                    else ""
                )
                _diagnose_later(
                    pending,
                    o,
                    ref_o[:, :, i],
                    label,
                    _prefixed(mistakes, where),
                    tr("Compare your step with the equations in the docstring."),
                )
            state = (
                new_state.detach().clone()
            )  # the learner keeps no handle on it
    _raise_pending(pending)
    return [c["label"] for c in cases]


def _prefixed(mistakes: dict, prefix: str) -> dict:
    return {m: (make, prefix + text) for m, (make, text) in mistakes.items()}


def check_linear_attention_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, state) -> (o, new_state)``: S ← S + k vᵀ, o = Sᵀ q / √d_k."""
    return _run(
        "linear-attention step",
        fn,
        lambda: _check_steps(fn, "linear"),
        time_limit,
    )


def check_gla_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, g, state)``: S ← Diag(exp g) S + k vᵀ, o = Sᵀ q / √d_k."""
    return _run(
        "gated linear-attention step",
        fn,
        lambda: _check_steps(fn, "gla"),
        time_limit,
    )


def check_delta_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, beta, state)``: S ← S + β k (v − Sᵀk)ᵀ, o = Sᵀ q / √d_k."""
    return _run(
        "delta-rule step", fn, lambda: _check_steps(fn, "delta"), time_limit
    )


def check_gated_delta_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, g, beta, state)``: S' = exp(g) S, S ← S' + β k (v − S'ᵀk)ᵀ."""
    return _run(
        "gated delta step", fn, lambda: _check_steps(fn, "gated"), time_limit
    )


def check_kda_step(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, g, beta, state)``: S' = Diag(exp g) S, then the delta write."""
    return _run("KDA step", fn, lambda: _check_steps(fn, "kda"), time_limit)


# --- reference steps (what a correct answer looks like; the exercises' hidden solutions) -----


def reference_linear_attention_step(q, k, v, *, state):
    """The package's linear-attention step, ``linear.linear_attention_step``."""
    return linear_attention_step(q, k, v, state=state)


def reference_gla_step(q, k, v, *, g, state):
    """The package's gated linear-attention step, ``gated.gla_step``."""
    return gla_step(q, k, v, g=g, state=state)


def reference_delta_step(q, k, v, *, beta, state):
    """The package's delta-rule step, ``delta.delta_rule_step``."""
    return delta_rule_step(q, k, v, beta=beta, state=state)


def reference_gated_delta_step(q, k, v, *, g, beta, state):
    """The package's gated delta step, ``delta.gated_delta_rule_step``."""
    return gated_delta_rule_step(q, k, v, g=g, beta=beta, state=state)


def reference_decode_step(q_t, k_t, v_t, cache: KVCache):
    """The package's cached decode step: append, then attend over the whole cache."""
    keys, values = cache.append(k_t, v_t)
    o_t, _ = attention.softmax_attention(q_t, keys, values, causal=False)
    return o_t


def reference_attention(q, k, v, *, causal: bool = False):
    """The package's softmax attention, returning only o."""
    return attention.softmax_attention(q, k, v, causal=causal)[0]


def reference_prenorm_block(x, mixer, mlp, mixer_norm, mlp_norm):
    """The block of :class:`attnlab.model.HybridBlock`, with its parts passed in."""
    h = x + mixer(mixer_norm(x))
    return h + mlp(mlp_norm(h))


def reference_linear_chunk(q, k, v, *, state):
    """One chunk through the package's ``linear_attention_chunk_reference``."""
    return linear_attention_chunk_reference(
        q,
        k,
        v,
        initial_state=state,
        output_final_state=True,
        chunk_size=q.shape[2],
    )


def reference_multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    """The package's heads: ``split_heads``, causal ``softmax_attention``,
    ``merge_heads``, then W_O."""
    q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    o, _ = attention.softmax_attention(q, k, v, causal=True)
    return merge_heads(o) @ w_o


def reference_delta_chunk(q, k, v, *, beta, state):
    """One chunk through the package's ``delta_rule_chunk_reference``."""
    return delta_rule_chunk_reference(
        q,
        k,
        v,
        beta=beta,
        initial_state=state,
        output_final_state=True,
        chunk_size=q.shape[2],
    )


# --- one chunk of the gated delta rule (Lesson 12) --------------------------------------------


def _check_gated_chunk(fn: Callable) -> list[str]:
    """Run ``fn`` on single chunks of the gated delta rule and compare with
    the recurrence over the same tokens: outputs first, then the state."""
    # imported here, to leave the module's import block to the other checkers
    from ._selfcheck_mistakes import gated_delta_chunk_mistakes

    gen = torch.Generator().manual_seed(6)
    cases = [
        ("a chunk of 4 from an empty state", 4, False, None),
        ("a chunk of 1 from a random state", 1, True, None),
        ("a chunk of 6 from a random state", 6, True, None),
        ("gates g = 0 (no decay), a chunk of 5", 5, True, 0.0),
        ("very negative gates g = -30, a chunk of 5", 5, True, -30.0),
    ]
    for label, c, random_state, gate in cases:
        q, k, v = (
            _randn(gen, 1, 2, c, 6),
            _randn(gen, 1, 2, c, 6),
            _randn(gen, 1, 2, c, 4),
        )
        k = torch.nn.functional.normalize(k, dim=-1)  # unit keys: stable
        state = (
            _randn(gen, 1, 2, 6, 4)
            if random_state
            else torch.zeros(1, 2, 6, 4)
        )
        beta = torch.rand(1, 2, c, generator=gen)
        g = (
            -torch.rand(1, 2, c, generator=gen)
            if gate is None
            else torch.full((1, 2, c), gate)
        )
        ref_o, ref_state = gated_delta_rule_recurrent(
            q,
            k,
            v,
            g=g,
            beta=beta,
            initial_state=state,
            output_final_state=True,
        )
        out = _call(
            fn, label, q, k, v, g=g, beta=beta, state=state, unchanged="state"
        )
        o, new_state = _output_and_state(
            out, label, (1, 2, c, 4), "[B, H, C, Dv]", (6, 4)
        )
        fallback = tr(
            "Compare with O = (Q ⊙ e^b) S + (Q Kᵀ ⊙ Γ)(U − W S), "
            "Γ_ij = e^(b_i − b_j) formed from the gates between j and i "
            "(never e^(−b_j) alone, which overflows)."
        )
        if not _close(o, ref_o):
            _diagnose(
                o,
                ref_o,
                label,
                gated_delta_chunk_mistakes(q, k, v, g, beta, state, 0),
                fallback,
            )
        if not _close(new_state, ref_state):
            _diagnose(
                new_state,
                ref_state,
                label,
                gated_delta_chunk_mistakes(q, k, v, g, beta, state, 1),
                tr("The outputs match; compare the new state with "
                   "e^(b_C) S + (K ⊙ e^(b_C − b))ᵀ (U − W S)."),
            )
    return [case[0] for case in cases]


def check_gated_delta_chunk(
    fn: Callable, *, time_limit: float = TIME_LIMIT
) -> CheckResult:
    """Check ``fn(q, k, v, *, g, beta, state) -> (o, new_state)``: one chunk
    of the gated delta rule (Lesson 12's decay-weighted WY / UT form);
    q, k ``[B, H, C, Dk]``, v ``[B, H, C, Dv]``, g and beta ``[B, H, C]``,
    state ``[B, H, Dk, Dv]``."""
    return _run(
        "one chunk of the gated delta rule",
        fn,
        lambda: _check_gated_chunk(fn),
        time_limit,
    )


def reference_gated_delta_chunk(q, k, v, *, g, beta, state):
    """One chunk through the package's ``gated_delta_rule_chunk_reference``."""
    from .delta import gated_delta_rule_chunk_reference

    return gated_delta_rule_chunk_reference(
        q,
        k,
        v,
        g=g,
        beta=beta,
        initial_state=state,
        output_final_state=True,
        chunk_size=q.shape[2],
    )

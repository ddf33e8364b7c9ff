"""Small helpers the lessons use to put computed numbers into their prose.

A lesson computes a number in a code cell and glues it (``myst_nb.glue``) under a key that the
Markdown cites as ``{glue:md}`key```; these helpers glue and format those numbers the same way in
every lesson:

- ``glue_md(key, text)``: glue ``text`` as Markdown, without displaying it;
- ``num(value)``: a number as Markdown with thousands separators (1,234,567);
- ``mb_mib(n)``: bytes in decimal and binary units, "6.19 MB (5.91 MiB)";
- ``sci(x)``: scientific notation with a real exponent, "6.6 × 10⁵⁶";
- ``vec(x)``: a short vector, "(1.00, −0.50)";
- ``ms(seconds)``: seconds as milliseconds, "1.234 ms".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from IPython.display import Markdown
from myst_nb import glue

_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return value


def glue_md(key: str, text: str) -> None:
    """Glue ``text`` as Markdown under ``key`` (hidden: the prose shows it, the cell does not)."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key: expected a non-empty string, got {key!r}")
    if not isinstance(text, str):
        raise ValueError(f"text: expected a string, got {type(text).__name__}")
    glue(key, Markdown(text), display=False)


def num(value: int | float | str) -> Markdown:
    """``value`` as Markdown for the prose: numbers with thousands separators
    (``1234567`` → "1,234,567", ``1234.5`` → "1,234.5"), anything else as ``str(value)``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Markdown(f"{value:,}")
    return Markdown(str(value))


def mb_mib(n: int | float) -> str:
    """Bytes in decimal and binary megabytes, two decimals: ``6_190_000`` → "6.19 MB (5.90 MiB)"
    (1 MB = 10⁶ B, 1 MiB = 2²⁰ B)."""
    n = _check_number("n", n)
    return f"{n / 1e6:,.2f} MB ({n / 2**20:,.2f} MiB)"


def sci(x: int | float, digits: int = 1) -> str:
    """``x`` in scientific notation with a typeset exponent: ``6.6e56`` → "6.6 × 10⁵⁶"
    (``digits`` decimals in the mantissa; minus signs are U+2212 as in the prose)."""
    x = _check_number("x", x)
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa.replace('-', '−')} × 10{str(int(exponent)).translate(_SUPERSCRIPTS)}"


def vec(x: Iterable[float]) -> str:
    """A short vector with two decimals: ``[1, -0.5]`` → "(1.00, −0.50)" (−0.00 shows as 0.00;
    accepts a list or a 1-D tensor)."""
    return "(" + ", ".join(f"{round(float(a), 2) + 0.0:.2f}".replace("-", "−") for a in x) + ")"


def ms(seconds: int | float) -> str:
    """Seconds as milliseconds with three decimals: ``0.001234`` → "1.234 ms"."""
    return f"{_check_number('seconds', seconds) * 1e3:.3f} ms"

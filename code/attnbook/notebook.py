"""Small helpers the lessons use to put computed numbers into their prose.

A lesson computes a number in a code cell and glues it (``myst_nb.glue``) under a key that the
Markdown cites as ``{glue:md}`key```; these helpers glue and format those numbers the same way in
every lesson:

- ``glue_md(key, text)``: glue ``text`` as Markdown, without displaying it;
- ``num(value)``: a number as Markdown with thousands separators (1,234,567);
- ``mb_mib(n)``: bytes in decimal and binary units, "6.19 MB (5.91 MiB)";
- ``millions(n)``: a large count as the reader's language says it, "18.9 million" or "1890 万";
- ``sci(x)``: scientific notation with a real exponent, "6.6 × 10⁵⁶";
- ``vec(x)``: a short vector, "(1.00, −0.50)";
- ``ms(seconds)``: seconds as milliseconds, "1.234 ms";
- ``reading_minutes(notebook)``: a lesson's reading time, counted from its own core path and,
  separately, from all of it (dropdowns, exercises and solutions included).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from IPython.display import Markdown
from myst_nb import glue

from attnlab.i18n import (
    LocalText,
    current_language,
    language,
    read_po,
    rendered_languages,
    text_of,
    tr,
)

_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return value


def glue_md(key: str, text: LocalText) -> None:
    """Glue ``text`` as Markdown under ``key`` (hidden: the prose shows it, the cell does not).

    ``text`` is a string (a fact: a number, a unit), or a function that writes a sentence
    chosen from data with ``tr``: it is then glued once per language the book is built in, as
    ``key`` (English) and ``key.zh_CN``, and each edition's page shows its own."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key: expected a non-empty string, got {key!r}")
    if not (isinstance(text, str) or callable(text)):
        raise ValueError(
            f"text: expected a string or a function writing one, got {type(text).__name__}"
        )
    langs = dict.fromkeys(("en", *rendered_languages())) if callable(text) else ("en",)
    for lang in langs:
        with language(lang):
            written = text_of(text)
        if not isinstance(written, str):
            raise ValueError(
                f"text: expected the function to write a string, got {type(written).__name__}"
            )
        glue(key if lang == "en" else f"{key}.{lang}", Markdown(written), display=False)


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


def millions(n: int | float, digits: int = 1) -> str:
    """A large count in the units the current language (``attnlab.i18n``) writes it in, rounded
    to ``digits`` decimals of a million: English counts millions (``18_874_368`` → "18.9
    million"), Chinese counts 万 (10⁴) and, from 10⁸, 亿 ("1890 万", and "5.28 亿" for 528
    million): the same number, at the same precision, in either edition."""
    n = _check_number("n", n)
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits: expected a whole number >= 0, got {digits!r}")
    if current_language() != "zh_CN":
        return f"{n / 1e6:,.{digits}f} million"
    rounded = round(n / 1e6, digits)
    if abs(rounded) >= 100:
        return f"{rounded / 100:.{digits + 2}f} 亿"
    return f"{rounded * 100:.{max(digits - 2, 0)}f} 万"


def sci(x: int | float, digits: int = 1) -> str:
    """``x`` in scientific notation with a typeset exponent: ``6.6e56`` → "6.6 × 10⁵⁶"
    (``digits`` decimals in the mantissa; minus signs are U+2212 as in the prose)."""
    x = _check_number("x", x)
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa.replace('-', '−')} × 10{str(int(exponent)).translate(_SUPERSCRIPTS)}"


def vec(x: Iterable[float]) -> str:
    """A short vector with two decimals: ``[1, -0.5]`` → "(1.00, −0.50)" (−0.00 shows as 0.00;
    accepts a list or a 1-D tensor)."""
    return (
        "("
        + ", ".join(
            f"{round(float(a), 2) + 0.0:.2f}".replace("-", "−") for a in x
        )
        + ")"
    )


def ms(seconds: int | float) -> str:
    """Seconds as milliseconds with three decimals: ``0.001234`` → "1.234 ms"."""
    return f"{_check_number('seconds', seconds) * 1e3:.3f} ms"


#: Reading speeds behind :func:`reading_minutes` (prose of a technical text, and the extra time
#: a reader spends on one display equation, one figure or slider panel, and one line of code).
WORDS_PER_MINUTE = 200
#: The Chinese edition's prose speed: characters of technical Chinese a minute (each Latin word or
#: number inside it counts as one character).
CHARS_PER_MINUTE = 300
SECONDS_PER_EQUATION = 10
SECONDS_PER_FIGURE = 12
SECONDS_PER_CODE_LINE = 2
#: Directives whose content is off the core path: "going deeper" dropdowns, exercises, solutions.
OPTIONAL_DIRECTIVES = (
    "dropdown",
    "exercise",
    "solution",
    "toggle",
    "admonition",
)
#: Headings after which the rest of a lesson is off the core path.
END_OF_CORE = re.compile(r"^##\s+(Exercises|Further reading)\b")


@dataclass(frozen=True)
class ReadingTime:
    """What :func:`reading_minutes` counted on a lesson's core path, and the minutes it makes;
    ``everything``, when given, is the same count over the whole lesson (dropdowns, exercises
    and their solutions included)."""

    words: int
    equations: int
    figures: int
    code_lines: int
    everything: ReadingTime | None = None
    #: "en": ``words`` are English words; "zh_CN": characters of the Chinese translation
    language: str = "en"

    @property
    def minutes(self) -> float:
        speed = WORDS_PER_MINUTE if self.language == "en" else CHARS_PER_MINUTE
        return (
            self.words / speed
            + (
                self.equations * SECONDS_PER_EQUATION
                + self.figures * SECONDS_PER_FIGURE
                + self.code_lines * SECONDS_PER_CODE_LINE
            )
            / 60
        )

    def __str__(self) -> str:
        if self.language != "en":
            with language(self.language):
                core = tr(
                    "about {minutes} minutes ({chars:,} characters of prose at {speed} a minute, "
                    "{equations} display equations, {figures} figures and {lines} lines of code "
                    "shown)", minutes=max(1, round(self.minutes)), chars=self.words,
                    speed=CHARS_PER_MINUTE, equations=self.equations, figures=self.figures,
                    lines=self.code_lines)
                if self.everything is None:
                    return core
                return core + tr("; about {minutes} minutes with every dropdown, exercise and "
                                 "solution", minutes=max(1, round(self.everything.minutes)))

        def count(n: int, thing: str) -> str:
            return f"{n:,} {thing}{'' if n == 1 else 's'}"

        equations = count(self.equations, "display equation")
        core = (
            f"about {max(1, round(self.minutes))} minutes ({count(self.words, 'word')} of "
            f"prose at {WORDS_PER_MINUTE} a minute, {equations}, "
            f"{count(self.figures, 'figure')} and {count(self.code_lines, 'line')} of code "
            "shown)"
        )
        if self.everything is None:
            return core
        return (
            f"{core}; about {max(1, round(self.everything.minutes))} minutes with every "
            "dropdown, exercise and solution"
        )


def _core_markdown(source: str) -> tuple[str, bool]:
    """The markdown of one cell without its optional parts; True once the core path has ended."""
    kept, fence = [], None
    for line in source.split("\n"):
        if END_OF_CORE.match(line):
            return "\n".join(kept), True
        opening = re.match(r"^(:{3,}|`{3,})\s*\{([\w-]+)\}", line)
        if (
            fence is None
            and opening
            and opening.group(2).split("-")[0] in OPTIONAL_DIRECTIVES
        ):
            fence = (
                None
                if opening.group(2).endswith("-end")
                else opening.group(1)
            )
            continue
        if fence is not None:
            fence = None if line.strip() == fence else fence
            continue
        kept.append(line)
    return "\n".join(kept), False


def _all_markdown(source: str) -> tuple[str, int]:
    """The markdown of one cell with every directive opened (its fences, ``:option:`` lines and
    a solution's label dropped; its title and content kept), and the number of lines inside
    fenced code blocks."""
    kept: list[str] = []
    code_lines = 0
    fences: list[
        tuple[str, str]
    ] = []  # the open fences and their kind, innermost last
    for line in source.split("\n"):
        stripped = line.strip()
        if fences and fences[-1][1] == "code":
            if stripped == fences[-1][0]:
                fences.pop()
            elif stripped:
                code_lines += 1
            continue
        directive = re.match(r"^(:{3,}|`{3,})\s*\{([\w:-]+)\}", stripped)
        if directive:
            fences.append((directive.group(1), "directive"))
            name = directive.group(2)
            if name == "literalinclude":
                kept.append(stripped)  # counted as a figure
            elif not name.startswith(("solution", "exercise-end", "glue")):
                kept.append(stripped[directive.end() :])  # its title
            continue
        if fences and stripped == fences[-1][0]:
            fences.pop()
            continue
        code = re.match(r"^(`{3,})[\w-]*$", stripped)
        if code:
            fences.append((code.group(1), "code"))
            continue
        if not re.match(r"^:[\w-]+:", stripped):
            kept.append(line)
    return "\n".join(kept), code_lines


def _count_markdown(
    text: str, translations: dict[str, str] | None = None
) -> tuple[int, int, int]:
    """Words, display equations and figures (includes, images) of a piece of markdown. With
    ``translations`` (English paragraph → Chinese), "words" are the characters of the Chinese
    translations of the paragraphs the markdown holds, each counted once: a paragraph found is
    taken out of ``translations``."""
    if translations is not None:
        flat = " ".join(text.split())
        found = [en for en in translations if en in flat]
        chars = sum(_chinese_length(translations.pop(en)) for en in found)
        _, equations, figures = _count_markdown(text)
        return chars, equations, figures
    equations = len(re.findall(r"\$\$.*?\$\$", text, flags=re.S))
    figures = len(
        re.findall(r"\{literalinclude\}|!\[|\{figure\}|\{image\}", text)
    )
    text = re.sub(r"\$\$.*?\$\$|```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]+\$|\{[\w:-]+\}`[^`]*`", " x ", text)
    return len(re.findall(r"[^\W_][\w’'-]*", text)), equations, figures


def _chinese_length(text: str) -> int:
    """Characters of Chinese prose: each CJK character, and each Latin word or number, is one
    (math and roles count as one word, as in English)."""
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]+\$|\{[\w:-]+\}`[^`]*`", " x ", text)
    return len(re.findall(r"[\u4e00-\u9fff]|[A-Za-z0-9][\w’'-]*", text))


def _page_translations(notebook: Path, lang: str) -> dict[str, str] | None:
    """The translated paragraphs of a lesson's page catalog (``locale/<lang>/LC_MESSAGES/
    chapters/<lesson>.po`` in the book's source), whitespace-normalised; None if none is found."""
    for folder in (notebook.resolve().parent, *notebook.resolve().parents):
        path = folder / "locale" / lang / "LC_MESSAGES" / "chapters" / f"{notebook.stem}.po"
        if path.exists():
            return {" ".join(en.split()): zh for en, zh in read_po(path).items()}
    return None


def reading_minutes(notebook: str | Path) -> ReadingTime:
    """Count a lesson's core path: the prose of its markdown cells up to "Exercises" or
    "Further reading", without dropdowns, exercises and solutions ("going deeper" material);
    its display equations; its shown figures and panels; and the lines of its shown code
    (code cells not hidden or folded; each ``literalinclude`` block is
    counted as one figure, since the reader skims the included function).
    ``.everything`` counts the whole lesson the same way: every markdown cell with its
    dropdowns, exercises and solutions (their code blocks as lines of code), and the code of
    folded (``hide-input``) cells too. The minutes follow from the module's reading speeds;
    nothing is typed by hand.

    In the Chinese edition (``attnlab.i18n.language("zh_CN")``) the prose is counted in
    characters of the page's translation (its catalog), at :data:`CHARS_PER_MINUTE`.
    """
    lang = current_language()
    translations = _page_translations(Path(notebook), lang) if lang != "en" else None
    if translations is None:
        lang = "en"
    # the paragraphs not yet counted, for the core path and for the whole lesson
    rest_of_core = None if translations is None else dict(translations)
    rest_of_whole = None if translations is None else dict(translations)
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    core = [0, 0, 0, 0]  # words, equations, figures, code lines
    whole = [0, 0, 0, 0]
    core_open = True
    for cell in cells:
        source = "".join(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "code":
            lines = len([line for line in source.split("\n") if line.strip()])
            figure = int(
                "remove-cell" not in tags
                and re.search(r"show_figure|slider_panel", source) is not None
            )
            if not tags & {"remove-input", "remove-cell"}:
                whole[3] += lines
                if core_open and "hide-input" not in tags:
                    core[3] += lines
            whole[2] += figure
            if core_open:
                core[2] += figure
            continue
        if cell["cell_type"] != "markdown":
            continue
        text, code_lines = _all_markdown(source)
        words, equations, figures = _count_markdown(text, rest_of_whole)
        whole = [
            whole[0] + words,
            whole[1] + equations,
            whole[2] + figures,
            whole[3] + code_lines,
        ]
        if core_open:
            text, ended = _core_markdown(source)
            words, equations, figures = _count_markdown(text, rest_of_core)
            core = [
                core[0] + words,
                core[1] + equations,
                core[2] + figures,
                core[3],
            ]
            core_open = not ended
    return ReadingTime(
        *core, everything=ReadingTime(*whole, language=lang), language=lang
    )

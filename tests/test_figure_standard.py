"""The figure standard (``attnbook.plotting``), checked on every frame of every slider panel and on
every static figure the lessons draw: no text cut by the figure's edge or by its axes, no two
texts colliding (tick labels, axis labels, titles, legends, annotations: overlapping, turned
labels measured as the turned rectangles they are, or on one line too close to read as two words,
``plotting.overlapping_texts``), no text smaller than 11 CSS px at the book's text column nor
8 CSS px on a 390-px phone.

The frames are laid out and drawn exactly as a panel draws them (``SliderPanel.draw_frame``, with
its reuse of the first frame's layout) but not rendered to PNG. The registry below lists each
figure with the size and slider grid its notebook uses; the figures that draw measurements get
stand-in measurements of the same shape. ``test_every_draw_function_is_registered`` keeps the
registry complete.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from attnbook import plotting
from attnbook.demos import state_memory, toy_attention
from attnbook.learned_head import PROBE_SENTENCE
from attnbook.plotting import new_figure, style_axes
from attnbook.widgets import Control, SliderPanel
from attnlab.configs import PUBLISHED, SOPHIA, SOPHIA_NANO
from attnlab.i18n import LANGUAGES, language
from attnlab.positions import sinusoidal_positions
from attnlab.serving import H200, Deployment
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

FIGURES = Path(__file__).resolve().parents[1] / "code" / "attnbook" / "figures"
#: The lesson figure modules this test covers: all of them.
MODULES = sorted(p.stem for p in FIGURES.glob("l[0-9][0-9]*_*.py"))


def fig_module(prefix: str):
    name = next(m for m in MODULES if m.startswith(prefix))
    return importlib.import_module(f"attnbook.figures.{name}")


@dataclass
class Entry:
    """One figure: ``draw(fig, **kwargs, **grid values)``, at the size its notebook gives it."""

    draw: Any
    grid: dict[str, list] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    covers: tuple[str, ...] = ()  # names of the draw functions this entry exercises

    @property
    def name(self) -> str:
        return self.covers[0] if self.covers else self.draw.__name__

    def size(self) -> tuple[float, float]:
        """(width, height) in inches as the lesson's notebook draws this figure."""
        kind = "panel" if self.grid else "static"
        if (kind, self.name) not in NOTEBOOK_SIZES:
            raise LookupError(f"no {kind} figure {self.name} in the lessons' notebooks")
        return NOTEBOOK_SIZES[kind, self.name]


def notebook_sizes() -> dict[tuple[str, str], tuple[float, float]]:
    """The size of every figure the notebooks draw: ("static" | "panel", draw function name) →
    (width, height) inches, read from their ``new_figure(w, h)`` and ``slider_panel`` calls."""
    sizes = {}
    for path in sorted((FIGURES.parents[2] / "chapters").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            for m in re.finditer(r"new_figure\(([\d.]+), ([\d.]+)\)\s*\n\s*figs\.(\w+)\(", source):
                sizes["static", m.group(3)] = (float(m.group(1)), float(m.group(2)))
            # show_figure(lambda fig: figs.draw_x(fig, …), size=(w, h), …) or
            # show_figure(figs.draw_x, size=(w, h), …)
            drawn = (r"show_figure\(\s*(?:lambda \w+:\s*)?figs\.(\w+)\b.*?"
                     r"size=\(([\d.]+),\s*([\d.]+)\)")
            for m in re.finditer(drawn, source, re.S):
                sizes["static", m.group(1)] = (float(m.group(2)), float(m.group(3)))
            panels = (r"slider_panel\(\s*(?:lambda[^:]*:\s*|functools\.partial\()?figs\.(\w+)"
                      r"(.*?)\n\)")
            for m in re.finditer(panels, source, re.S):
                width = re.search(r"\bwidth=([\d.]+)", m.group(2))
                height = re.search(r"\bheight=([\d.]+)", m.group(2))
                sizes["panel", m.group(1)] = (float(width.group(1)) if width else 6.4,
                                             float(height.group(1)) if height else 3.6)
    return sizes


NOTEBOOK_SIZES = notebook_sizes()


def _measured_times() -> dict:
    """Stand-in measurements shaped like the lessons' (seconds, growing with the length)."""
    lengths = [256, 512, 1024, 2048, 4096, 8192]
    seconds = {"parallel": [2e-9 * t * t for t in lengths],
               "recurrent": [2e-5 * t for t in lengths], "chunk": [2e-6 * t for t in lengths]}
    grid_lengths, grid_chunks = [1024, 4096], [1, 4, 16, 64, 256, 1024]
    chunk_s = {(t, c): 1e-6 * t * (1 + 64 / c + c / 64) for t in grid_lengths for c in grid_chunks}
    form_s = {(t, f): seconds[f][lengths.index(t)] for t in grid_lengths
              for f in ("parallel", "recurrent")}
    return {"lengths": lengths, "seconds": seconds, "chunk_s": chunk_s, "form_s": form_s,
            "grid": {"chunk_size": grid_chunks, "length": grid_lengths}}


def _nano_history() -> tuple[list[int], list[list[int]], tuple[str, ...]]:
    kinds = SOPHIA_NANO.layer_pattern
    tokens = list(range(8, 129))
    rows = [[4096 if k != "mla" else 96 * t for k in kinds] for t in tokens]
    return tokens, rows, kinds


def _recall_study() -> tuple[dict, list[dict]]:
    """Lesson 17's inputs: the shipped study's summary, and stand-in live rows (the study's own
    seed-0 rows at N = 2, shaped like train_cell's)."""
    from attnbook.recall_study import STUDY_PATH, load_study, summarize

    study = load_study(STUDY_PATH)
    lr = {(m, n): c.lr for (m, n), c in summarize(study).items()}
    live = [r for r in study["rows"] if r["n_pairs"] == 2 and r["seed"] == 0
            and r["lr"] == lr[r["mixer"], 2]]
    return summarize(study), live


def _decode_costs():
    """Lesson 18's input: measured costs shaped like attnbook.decode_cost.measure_decode_costs."""
    from attnbook.decode_cost import CostData

    contexts = (512, 2048, 8192, 32768)
    attn = [(8e-5, 1.1e-4, 3.5e-4, 1.5e-3), (9e-5, 1.2e-4, 3.6e-4, 1.6e-3)]
    return CostData("Sophia heads", 2, 32, contexts, tuple(map(tuple, attn)),
                    (131072, 524288, 2097152, 8388608), (1.7e-4, 1.8e-4), 8192)


def _bpe_pieces() -> dict:
    """Lesson 1's tokenizer panel: BPE trained on the toy corpus at each offered vocabulary."""
    from attnbook.demos.token_embeddings import embedding_bytes
    from attnbook.demos.toy_corpus import toy_corpus
    from attnlab.tokenizer import train_bpe

    corpus, held_out = " ".join(toy_corpus(2000, 0)), toy_corpus(200, 1)
    full = train_bpe(corpus, 409)
    vocabs = (256, 272, 288, 320, 352, 384, full.size)
    tokenizers = {v: train_bpe(corpus, v) for v in vocabs}
    sentence = "The red cat eats cheese. A purple rabbit eats pizza."
    return {
        "vocabs": list(vocabs),
        "pieces": {v: [t.piece(i) for i in t.encode(sentence)] for v, t in tokenizers.items()},
        "per_sentence": {v: sum(len(t.encode(" " + s)) for s in held_out) / len(held_out)
                         for v, t in tokenizers.items()},
        "table_bytes": {v: embedding_bytes(v, SOPHIA.d_model) for v in vocabs},
    }


def _lifetimes() -> dict:
    """Lesson 14's lifetime experiment on two seeds (the figure draws any number)."""
    from attnbook.demos.channel_lifetimes import lifetime_experiment

    return lifetime_experiment(seeds=(0, 1))


def registry() -> dict[str, Entry]:
    l01, l02, l03, l04, l05, l06, l07, l08, l09, l10, l11, l12, l13, l14, l15, l16, l19 = (
        fig_module(p) for p in ("l01", "l02", "l03", "l04", "l05", "l06", "l07", "l08", "l09",
                                "l10", "l11", "l12", "l13", "l14", "l15", "l16_", "l19"))
    l16b = fig_module("l16b")
    l17, l18, l20 = (fig_module(p) for p in ("l17", "l18", "l20"))
    from attnbook.architectures_map import MAP_CONTEXTS, MECHANISMS

    summary, live = _recall_study()
    costs = _decode_costs()
    n_fail = max(n for _, n in summary)
    l05b = fig_module("l05b")
    probe = PROBE_SENTENCE
    causal = torch.rand(len(probe), len(probe)).tril()
    stand_in = causal / causal.sum(-1, keepdim=True)  # rows of a causal head, summing to 1
    # six stand-in loss curves falling from ln V towards a floor, and logits over 52 words
    losses = {seed: [0.92 + 3.0 * math.exp(-i / (40 + 5 * seed)) for i in range(301)]
              for seed in range(6)}
    words, logits = [f"word{i}" for i in range(52)], torch.linspace(4, -4, 52)
    bpe = _bpe_pieces()
    models = list(PUBLISHED)
    contexts = [4096, 131072, 2**20]
    m = _measured_times()
    tokens, rows, kinds = _nano_history()
    n_tokens = len(toy_attention.sentence_weights()[0])
    marker = ("Sophia", SOPHIA.vocab_size, SOPHIA.d_model)
    return {
        "L16b memory per sequence": Entry(l16b.draw_memory_per_sequence,
                                          kwargs={"names": models, "contexts": contexts}),
        "L16b calculator": Entry(l16b.draw_calculator, grid={
            "model": models, "context": contexts, "deployment": [
                Deployment(H200, 8, 8), Deployment(H200, 8, 8, dp_attention=True)]}),
        "L16b batch sweep": Entry(l16b.draw_batch_sweep, kwargs={
            "names": models, "context": 131072, "batches": [2**i for i in range(10)],
            "deployment": Deployment(H200, 8, 8)}),
        "L1 one-hot lookup": Entry(l01.draw_one_hot_lookup, kwargs={"token_id": 2}),
        "L1 table memory": Entry(
            lambda fig, vocab_size, d_model: l01.draw_table_memory(fig, vocab_size, d_model,
                                                                   marker),
            grid={"vocab_size": [8192, 16384, 32768, 65536, 131072, 262144],
                  "d_model": list(l01.MEMORY_WIDTHS)}, covers=("draw_table_memory",)),
        "L1 bpe pieces": Entry(
            lambda fig, vocab_size: l01.draw_bpe_pieces(
                fig, vocab_size, bpe["pieces"][vocab_size], bpe["per_sentence"],
                bpe["table_bytes"], SOPHIA.d_model),
            grid={"vocab_size": bpe["vocabs"]}, covers=("draw_bpe_pieces",)),
        "L1 sinusoidal positions": Entry(l01.draw_sinusoidal_positions,
                                         kwargs={"positions": sinusoidal_positions(64, 16)}),
        "L1 clusters emerging": Entry(l01.draw_clusters_emerging,
                                      grid={"n_sentences": list(toy_attention.TRAINING_SENTENCES)}),
        "L1 neighbours": Entry(l01.draw_neighbours, grid={"word": [
            "cat", "horse", "bread", "cheese", "red", "green", "garden", "river", "two",
            "seven"]}),
        "L2 query meets keys": Entry(l02.draw_query_meets_keys, kwargs={"query": 4}),
        "L2 attention row": Entry(l02.draw_attention_row,
                                  grid={"query": list(range(n_tokens)), "causal": [False, True]}),
        "L2 dot products": Entry(l02.draw_dot_product_growth,
                                 kwargs={"context": 4096}),
        "L3 scaled vs unscaled": Entry(l03.draw_scaled_vs_unscaled,
                                       kwargs={"dim": 96, "n_keys": 16}),
        "L3 score spread": Entry(l03.draw_score_spread,
                                 grid={"dim": list(toy_attention.SPREAD_DIMS)}),
        "L3 temperature": Entry(l03.draw_temperature,
                                grid={"temperature": list(l03.TEMPERATURES)}),
        "L4 constructed heads": Entry(l04.draw_constructed_heads,
                                      kwargs={"sharpness": 8.0}),
        "L4 key/value heads": Entry(l04.draw_kv_heads,
                                    grid={"n_kv_heads": list(l04.KV_HEAD_COUNTS)}),
        "L5 permutation": Entry(l05.draw_permutation),
        "L5 causal mask": Entry(l05.draw_causal_mask),
        "L5 rope offset": Entry(l05.draw_rope_offset, grid={"shift": list(l05.ROPE_SHIFTS),
                                                            "offset": list(l05.ROPE_OFFSETS)}),
        "L5 rope frequencies": Entry(l05.draw_rope_frequencies,
                                     grid={"base": list(l05.ROPE_BASES)}),
        "L5b built and learned": Entry(l05b.draw_built_and_learned, kwargs={
            "learned": stand_in, "words": probe, "name": "layer 2, head 2"}),
        "L5b head at step": Entry(
            lambda fig, step: l05b.draw_head_at_step(fig, stand_in, probe, step, 0.99,
                                                     losses, 0.92),
            grid={"step": [0, 10, 150, 300]}, covers=("draw_head_at_step",)),
        "L5b next word": Entry(
            lambda fig, tau: l05b.draw_next_word(fig, words, logits, tau, words[:6]),
            grid={"tau": [0.25, 0.5, 1.0, 2.0, 4.0]}, covers=("draw_next_word",)),
        "L6 recompute": Entry(l06.draw_recompute, kwargs={"n_steps": 8}),
        "L6 step times": Entry(l06.draw_step_times, kwargs={
            "contexts": [64, 128, 256, 512, 1024, 2048],
            "cached_seconds": [2e-5 * (1 + c / 512) for c in (64, 128, 256, 512, 1024, 2048)],
            "uncached_seconds": [1e-7 * c * c for c in (64, 128, 256, 512, 1024, 2048)],
            "threads": 1}),
        "L6 cache calculator": Entry(l06.draw_cache_calculator, grid={
            "context": list(l06.CALCULATOR_CONTEXTS), "dtype": ["fp32", "bf16", "fp8"]}),
        "L6 decode step": Entry(l06.draw_decode_step,
                                grid={"step": list(range(1, l06.DECODE_STEPS + 1))}),
        "L7 cache and state": Entry(l07.draw_cache_and_state,
                                    grid={"t": [1, 2, 3, 4, 6, 8, 12, 16]}),
        "L7 memory vs context": Entry(l07.draw_memory_vs_context, grid={
            "context": [256, 1024, 4096, 16384, 65536, 262144, 1048576]}),
        "L8 three forms": Entry(l08.draw_three_forms,
                                kwargs={"length": 12, "chunk_size": 4}),
        "L8 form times": Entry(l08.draw_form_times, kwargs={
            "lengths": m["lengths"], "seconds": m["seconds"], "chunk_size": 64, "threads": 1,
            "spread": {f: [(0.7 * s, 2.5 * s) for s in m["seconds"][f]] for f in m["seconds"]},
            "crossing": float(m["lengths"][2])}),
        "L8 chunk size": Entry(l08.chunk_size_panel(m["chunk_s"], m["form_s"], head_dim=64),
                               grid=m["grid"], covers=("chunk_size_panel",
                                                            "draw_chunk_size")),
        "L9 readout": Entry(l09.draw_readout, kwargs={"n_pairs": 8, "dim": 16}),
        "L9 gram": Entry(l09.draw_gram, kwargs={"n_pairs": 32, "dims": (32, 96)}),
        "L9 capacity": Entry(l09.draw_capacity,
                             grid={"n_pairs": list(state_memory.CAPACITY_PAIRS),
                                   "dim": list(state_memory.CAPACITY_DIMS)}),
        "L10 gate kinds": Entry(l10.draw_gate_kinds),
        "L10 forgetting": Entry(l10.draw_forgetting,
                                grid={"alpha": list(state_memory.FORGET_ALPHAS),
                                      "length": list(state_memory.FORGET_LENGTHS)}),
        "L11 overwrite": Entry(l11.draw_overwrite,
                               grid={"beta": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]}),
        "L11 key norm": Entry(l11.draw_key_norm_stability,
                              grid={"key_norm": [0.5, 1.0, 2.0, 4.0],
                                    "beta": [0.25, 0.5, 1.0, 1.5]}),
        "L11 recall vs pairs": Entry(l11.draw_recall_vs_pairs),
        "L12 switch stream": Entry(l12.draw_switch_stream),
        "L12 switch errors": Entry(l12.draw_switch_errors, grid={
            "alpha_boundary": [1.0, 0.5, 0.1, 0.01], "beta": [0.5, 1.0],
            "query_noise": [0.0, 0.5]}),
        "L13 WY identity": Entry(l13.draw_wy_identity,
                                 kwargs={"n_factors": 4, "head_dim": 8}),
        "L13 measured times": Entry(l13.draw_measured_times, kwargs={
            "lengths": [256, 1024, 4096], "recurrent_seconds": [0.02, 0.08, 0.32],
            "chunk_seconds": [0.002, 0.005, 0.015],
            "size_seconds": {c: 0.005 * (1 + 16 / c + c / 256) for c in (1, 2, 4, 8, 16, 32,
                                                                          64, 128, 256)},
            "size_length": 1024, "chunk_size": 64}),
        "L13 chunk split": Entry(l13.draw_chunk_split,
                                 grid={"chunk_size": list(l13.CHUNK_SIZES)}),
        "L14 decay then correct": Entry(l14.draw_decay_then_correct),
        "L14 channel retention": Entry(l14.draw_channel_retention,
                                       grid={"spread": list(l14.SPREADS),
                                             "write_strength": list(l14.WRITE_STRENGTHS)}),
        "L14 channel lifetimes": Entry(l14.draw_channel_lifetimes,
                                       kwargs={"result": _lifetimes()}),
        "L15 cache entry": Entry(l15.draw_cache_entry),
        "L15 MLA bytes": Entry(l15.draw_mla_bytes, grid={
            "kv_lora_rank": [128, 256, 384, 512, 768, 1024], "rope_dim": [16, 32, 48, 64, 96]}),
        "L16 layer pattern": Entry(l16.draw_layer_pattern),
        "L16 memory calculator": Entry(l16.draw_memory_calculator, grid={
            "preset": list(l16.MEMORY_PRESETS), "context": [4096, 32768, 131072, 2**20],
            "number_format": list(l16.NUMBER_FORMATS)}),
        "L16 bytes vs context": Entry(l16.draw_bytes_vs_context),
        "L19 training loss": Entry(l19.draw_training_loss, kwargs={
            "losses": [4.0 * 0.97**i + 1.2 for i in range(200)], "floor": 1.1}),
        "L19 cache growth": Entry(l19.draw_cache_growth,
                                  kwargs={"tokens": tokens, "layer_bytes": rows, "kinds": kinds}),
        "L19 cache at step": Entry(
            lambda fig, tokens_now: l19.draw_cache_at_step(fig, tokens_now, tokens, rows, kinds),
            grid={"tokens_now": tokens[::4][:30]}, covers=("draw_cache_at_step",)),
        "L17 MQAR sequence": Entry(l17.draw_mqar_sequence, kwargs={"n_pairs": 4, "seed": 0}),
        "L17 study": Entry(l17.draw_study, kwargs={"summary": summary, "head_dim": 8}),
        "L17 answer analysis": Entry(l17.draw_answer_analysis,
                                     kwargs={"summary": summary, "n_pairs": n_fail}),
        "L17 live vs study": Entry(l17.draw_live_vs_study,
                                   kwargs={"rows": live, "summary": summary}),
        "L17 training curves": Entry(
            lambda fig, mixer: l17.draw_training_curves(fig, live, mixer=mixer),
            grid={"mixer": [r["mixer"] for r in live]}, covers=("draw_training_curves",)),
        "L18 costs": Entry(
            lambda fig, quantity, scope: l18.draw_costs(fig, costs, quantity=quantity,
                                                        scope=scope),
            grid={"quantity": list(l18.QUANTITIES), "scope": list(l18.SCOPES)},
            covers=("draw_costs",)),
        "L20 architecture": Entry(l20.draw_architecture, grid={"arch": list(MECHANISMS)}),
        "L20 memory by architecture": Entry(l20.draw_memory_by_architecture,
                                            grid={"context": list(MAP_CONTEXTS)}),
        "L20 memory at 4k": Entry(l20.draw_memory_by_architecture, kwargs={"context": 4096}),
    }


REGISTRY = registry()
#: Figures not yet brought to the standard, each with what the test finds wrong. ``strict``: once
#: a figure passes, it must leave this list.
NOT_YET: dict[str, str] = {
}


def problems(fig: Figure) -> list[str]:
    """What the standard finds wrong in ``fig`` as it would be drawn now: text cut by the
    figure's edge or its axes, text too small, and texts that collide (overlap, or stand on
    one line too close to read apart: ``plotting.overlapping_texts``)."""
    texts = plotting.drawn_texts(fig)
    found = [f"clipped: {t.get_text()[:40]!r}" for t in plotting.clipped_texts(fig, texts)]
    for text, _ in texts:
        label = repr(text.get_text()[:40])
        size = text.get_fontsize()
        column = plotting.text_css_px(fig, size, plotting.COLUMN_CSS_PX)
        phone = plotting.text_css_px(fig, size, plotting.PHONE_COLUMN_CSS_PX)
        if column < plotting.MIN_TEXT_CSS_PX - 1e-6:
            found.append(f"{column:.1f} CSS px at the column: {label}")
        elif phone < plotting.MIN_PHONE_TEXT_CSS_PX - 1e-6:
            found.append(f"{phone:.1f} CSS px on a phone: {label}")
    found += [f"collide: {a.get_text()[:30]!r} and {b.get_text()[:30]!r}"
              for a, b in plotting.overlapping_texts(fig, texts)]
    return found


def frames(entry: Entry):
    """Each frame of ``entry`` drawn as its panel draws it: (values, figure with it drawn)."""
    controls = [Control(name, values, name, values[0]) for name, values in entry.grid.items()]

    def draw(fig, **values):
        entry.draw(fig, **entry.kwargs, **values)

    panel = SliderPanel(draw, controls, "alt", "static", new_figure(*entry.size()), 1)
    for index in itertools.product(*(range(len(c.values)) for c in controls)):
        layout = panel.draw_frame(index)
        yield panel.values_at(index), panel.figure
        panel.remember_layout(layout)


def check(name: str) -> list[str]:
    found = []
    with plotting.missing_glyphs() as tofu:
        for values, fig in frames(REGISTRY[name]):
            found += [f"{values}: {p}" for p in problems(fig)]
    return found + [f"no glyph (an empty box): {c!r}" for c in dict.fromkeys(tofu)]


def translated(name: str) -> bool:
    """Whether the lesson of figure ``name`` ("L5b built and learned") has Chinese messages
    (``attnlab/locale/zh_CN/l05b.po``); the others draw in English in both editions."""
    lesson = name.split()[0][1:]
    number = f"{int(lesson.rstrip('abc')):02d}{lesson.lstrip('0123456789')}"
    return (LOCALE / f"l{number}.po").exists()


LOCALE = Path(__file__).resolve().parents[1] / "code" / "attnlab" / "locale" / "zh_CN"
CASES = [(n, lang) for n in REGISTRY for lang in LANGUAGES if lang == "en" or translated(n)]


@pytest.mark.parametrize(("name", "lang"), [pytest.param(n, lang, marks=pytest.mark.xfail(
    strict=True, reason=NOT_YET[n])) if n in NOT_YET else (n, lang) for n, lang in CASES])
def test_figure_meets_the_standard_in_every_frame(name, lang):
    """In every language the lesson is drawn in: Chinese labels are wider than English ones."""
    with language(lang):
        found = check(name)
    assert not found, f"{name}: {len(found)} problems, e.g.\n" + "\n".join(found[:12])


def test_every_draw_function_is_registered():
    covered = set()
    for entry in REGISTRY.values():
        covered |= set(entry.covers) or {entry.draw.__name__}
    for module_name in MODULES:
        module = importlib.import_module(f"attnbook.figures.{module_name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and name.startswith("draw_"):
                assert name in covered, f"{module_name}.{name} has no entry in the registry"


def test_the_standard_catches_small_clipped_and_overlapping_text():
    fig = new_figure(6.4, 3.6)
    ax = fig.subplots()
    ax.text(0.5, 0.5, "tiny", fontsize=6, transform=ax.transAxes)
    ax.text(1.3, 0.5, "beyond the right edge", transform=ax.transAxes)
    ax.text(0.1, 0.2, "first label", transform=ax.transAxes)
    ax.text(0.12, 0.2, "second label", transform=ax.transAxes)
    found = " | ".join(problems(fig))
    assert "CSS px" in found and "tiny" in found
    assert "clipped: 'beyond the right edge'" in found
    assert "collide: 'first label' and 'second label'" in found


def texts_of(pairs) -> list[tuple[str, str]]:
    return [(a.get_text(), b.get_text()) for a, b in pairs]


def test_overlapping_texts_finds_texts_drawn_on_each_other():
    fig = new_figure(6.4, 3.6)
    ax = fig.subplots()
    ax.text(0.1, 0.5, "first label", transform=ax.transAxes)
    ax.text(0.14, 0.52, "second label", transform=ax.transAxes)
    ax.set_title("a title")
    assert texts_of(plotting.overlapping_texts(fig)) == [("first label", "second label")]


def test_overlapping_texts_finds_words_that_run_together_on_one_line():
    """Touching boxes on one line read as one word ("placenumber"); a word space (0.32 em)
    apart they read as two; stacked lines whose boxes touch are fine, and so are staggered
    labels; each line of a text is its own line."""
    fig = new_figure(6.4, 3.6)
    (ax,) = plotting.fixed_axes(fig, 1)

    def beside(x, y, space_pt):
        ax.text(x, y, "place", ha="right", transform=ax.transAxes)
        shift = ScaledTranslation(space_pt / 72, 0, fig.dpi_scale_trans)
        ax.text(x, y, "number", ha="left", transform=ax.transAxes + shift)

    beside(0.3, 0.8, 0)
    beside(0.3, 0.4, 0.32 * plotting.SMALL_TEXT_PT)
    ax.text(0.6, 0.5, "a line", transform=ax.transAxes, va="bottom")
    ax.text(0.6, 0.5, "the next line", transform=ax.transAxes, va="top")
    # staggered labels: the second one's line is under the first, touching boxes or not
    ax.text(0.8, 0.9, "colour", ha="right", va="top", transform=ax.transAxes)
    ax.text(0.8, 0.9, "\nplace", ha="left", va="top", transform=ax.transAxes)
    # blocks of lines side by side, line against line
    ax.text(0.8, 0.3, "4 of those\nkeys get", ha="right", transform=ax.transAxes)
    ax.text(0.8, 0.3, "read\nthe latest", ha="left", transform=ax.transAxes)
    texts = plotting.drawn_texts(fig)
    assert texts_of(plotting.overlapping_texts(fig, texts)) == [
        ("place", "number"), ("4 of those\nkeys get", "read\nthe latest")]
    boxes = {t.get_text(): box for t, box in texts}
    assert abs(boxes["a line"].y0 - boxes["the next line"].y1) < 1e-6  # they do touch


def turned_ticks(spacing: float) -> Figure:
    """A figure with ten 45°-turned tick labels ``spacing`` points apart."""
    fig = new_figure(6.4, 3.6)
    (ax,) = plotting.fixed_axes(fig, 1)
    ax.set_xlim(0, 1)
    width_pt = fig.get_figwidth() * 72 * ax.get_position().width
    ticks = [0.05 + i * spacing / width_pt for i in range(10)]
    ax.set_xticks(ticks, [f"label {i}" for i in range(10)], rotation=45, ha="right")
    return fig


def test_overlapping_texts_measures_turned_labels_as_the_turned_rectangles_they_are():
    crowded = turned_ticks(10)  # 7 points apart across the text: less than its height
    assert texts_of(plotting.overlapping_texts(crowded))[:2] == [
        ("label 0", "label 1"), ("label 1", "label 2")]
    spaced = turned_ticks(24)  # their bounding boxes overlap, the labels do not
    texts = [(t, box) for t, box in plotting.drawn_texts(spaced) if t.get_rotation() == 45]
    assert texts[0][1].x1 > texts[1][1].x0 + 5
    assert plotting.overlapping_texts(spaced, texts) == []


def test_overlapping_texts_passes_a_clean_figure():
    fig = new_figure(6.4, 3.6, ncols=2)
    left, right = fig.axes
    left.plot([0, 1], [0, 1], label="rising")
    left.plot([0, 1], [1, 0], label="falling")
    left.legend(title="two lines")
    style_axes(left, "time (s)", "value (units)", "a title")
    plotting.heatmap(right, torch.rand(3, 4), xlabel="key", ylabel="query",
                     xticklabels=["the", "cat", "sat", "down"],
                     yticklabels=["a", "b", "c"], colorbar_label="weight", annotate=True)
    texts = plotting.drawn_texts(fig)
    assert len(texts) > 20  # ticks, labels, legend, cells, colour bar
    assert plotting.overlapping_texts(fig, texts) == []
    assert plotting.clipped_texts(fig, texts) == []


def test_clipped_texts_finds_text_cut_by_the_figure_or_its_axes():
    fig = new_figure(6.4, 3.6)
    ax = fig.subplots()
    ax.text(0.5, 1.02, "above the axes, not clipped", transform=ax.transAxes)
    ax.text(0.9, 0.5, "cut by the axes' right edge", transform=ax.transAxes, clip_on=True)
    ax.text(0.5, -0.35, "below the figure", transform=ax.transAxes)
    assert sorted(t.get_text() for t in plotting.clipped_texts(fig)) == [
        "below the figure", "cut by the axes' right edge"]


def test_text_size_is_measured_at_the_shown_width():
    fig = new_figure(10, 4)  # shown at the column's 688 CSS px, not at 960
    assert plotting.text_css_px(fig, 12) == pytest.approx(12 * 688 / 10 / 72)
    assert plotting.text_css_px(fig, 12, 358) == pytest.approx(12 * 358 / 10 / 72)
    small = new_figure(5, 3)  # 480 CSS px: narrower than the column, shown at its own size
    assert plotting.text_css_px(small, 12) == pytest.approx(12 * 96 / 72)
    assert math.isclose(plotting.display_width_css(small), 480)


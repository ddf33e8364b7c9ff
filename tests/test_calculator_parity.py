"""The website's calculator (``_static/calculator.js``, run in headless Chromium) gives the
package's answers, byte for byte, and refuses what the package refuses with the same message.

No site build is needed: the script is loaded into a blank page. Compared, for every config of
``tests/data/hf_configs.json`` and every published preset at several contexts, cache dtypes and
state dtypes: the layer count and layout, each kind's cache, state and conv bytes
(:func:`attnlab.serving.sequence_bytes`), the cache a token adds
(:func:`attnlab.memory.cache_bytes_per_token`), where the cache stops growing
(:func:`attnlab.memory.context_limit`) and the longest context that fits in a memory
(:func:`attnlab.serving.largest_context` at batch 1, the memory given on top of the weights).
Then every field of those configs mutated (test_config_reader's mutations) and its bad
configs: the same refusal (error type and message) or the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from attnlab.configs import architecture_from_config
from attnlab.kinds import KINDS
from attnlab.memory import cache_bytes_per_token, context_limit, format_bytes
from attnlab.serving import largest_context, sequence_bytes, weight_bytes
from test_config_reader import BAD_CONFIGS, DELETE, MUTATIONS, VALID, _mutate, _paths

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "_static" / "calculator.js"
PRESETS = ROOT / "_static" / "calculator_presets.js"

CONTEXTS = (0, 1, 4095, 4096, 4097, 131_072, 1_000_000)
CACHE_DTYPES = ("bf16", "fp8", "fp32", "int4")
STATE_DTYPES = ("auto", "fp32", "bf16")
MEMORIES = (0, 10**6, 8 * 2**30, 80 * 10**9)
SIZES = (DELETE, 1, 3, 10_000)
"""The mutations whose answers are also compared for the longest context that fits."""


def package_answer(text: str, context: int, cache: str, state: str, memory: int | None):
    """What the package says for one input: the fields ``calculator.js``'s ``compute`` gives."""
    try:
        arch = architecture_from_config(json.loads(text), params_total=10**9)
    except (TypeError, ValueError) as error:
        return {"ok": False, "error": type(error).__name__, "message": str(error)}
    seq = sequence_bytes(arch, context, cache_dtype=cache, state_dtype=state)
    kinds = []
    for kind in arch.kinds:
        group = [layer for layer in seq.layers if layer.kind == kind]
        kinds.append({
            "kind": kind, "label": KINDS[kind].label, "layers": len(group),
            **{part: str(sum(getattr(x, f"{part}_bytes") for x in group))
               for part in ("cache", "state", "conv")},
        })
    limit = context_limit(arch)
    answer = {
        "ok": True, "name": arch.name, "layers": arch.n_layers, "layout": arch.layout,
        "kinds": kinds, "cache": str(seq.cache_bytes), "state": str(seq.state_bytes),
        "conv": str(seq.conv_bytes), "total": str(seq.total_bytes),
        "perToken": str(cache_bytes_per_token(arch, cache)),
        "contextLimit": None if limit is None else str(limit),
    }
    if memory is not None:
        longest = largest_context(arch, 1, weight_bytes(arch) + memory, cache_dtype=cache,
                                  state_dtype=state)
        answer["largestContext"] = str(longest)
    return answer


@pytest.fixture(scope="module")
def browser():
    """This module's own headless Chromium, closed when the module ends: the session's (in
    conftest) keeps Playwright's event loop running in the main thread, which would break
    later tests of the package run in the same session (``make check``)."""
    from conftest import CHROMIUM
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def browser_answers(browser, cases: list[tuple]) -> list[dict]:
    """``compute`` of calculator.js on every case, in a blank page of headless Chromium."""
    page = browser.new_page()
    try:
        page.add_script_tag(path=str(SCRIPT))
        answers = []
        for start in range(0, len(cases), 400):
            answers += page.evaluate(
                """cases => cases.map(([text, context, cache, state, memory]) => {
                     const r = attnlabCalculator.compute(text, {context: BigInt(context),
                       cacheDtype: cache, stateDtype: state,
                       memory: memory === null ? null : BigInt(memory)});
                     if (r.ok) r.kinds.forEach(k => delete k.stateDtype);
                     if (r.ok) { delete r.modelType; delete r.convDtype; }
                     return r;
                   })""",
                [[text, str(c), cache, state, None if m is None else str(m)]
                 for text, c, cache, state, m in cases[start:start + 400]],
            )
        return answers
    finally:
        page.close()


def assert_same(browser, cases: list[tuple]) -> int:
    """Assert that the browser and the package agree on every case; return how many refused."""
    got = browser_answers(browser, cases)
    refused = 0
    for case, js in zip(cases, got, strict=True):
        expected = package_answer(*case)
        assert js == expected, (case, js, expected)
        refused += not expected["ok"]
    return refused


def released() -> dict[str, str]:
    """Every released config the course keeps, as the JSON text a reader would paste."""
    return {name: json.dumps(config, indent=2) for name, config in VALID.items()}


def test_every_released_config_gives_the_packages_bytes(browser):
    cases = [
        (text, context, cache, state, None)
        for text in released().values()
        for context in CONTEXTS for cache in CACHE_DTYPES for state in STATE_DTYPES
    ]
    cases += [
        (text, 4096, cache, state, memory)
        for text in released().values()
        for cache in CACHE_DTYPES[:3] for state in STATE_DTYPES[:2] for memory in MEMORIES
    ]
    assert assert_same(browser, cases) == 0
    assert len(VALID) >= 20  # the 13 hf_configs.json models and the 7 published ones


def test_every_mutated_field_gives_the_same_refusal_or_the_same_bytes(browser):
    cases = []
    for config in VALID.values():
        for path in _paths(config):
            if isinstance(path[-1], int) and path[-1] > 2:
                continue  # list entries: the first three stand for the rest
            for value in MUTATIONS:
                mutated = _mutate(config, path, value)
                # the longest context (a search, slow in Python) where a size changes
                memory = 10**10 if value in SIZES else None
                cases.append((json.dumps(mutated), 4096, "bf16", "auto", memory))
    refused = assert_same(browser, cases)
    assert 0 < refused < len(cases)  # both branches are exercised
    assert DELETE in MUTATIONS


def test_bad_configs_are_refused_with_the_packages_message(browser):
    cases = [(json.dumps(config), 4096, "bf16", "auto", None) for config, _, _ in BAD_CONFIGS]
    assert assert_same(browser, cases) == len(BAD_CONFIGS)


@pytest.mark.parametrize("text", [
    "", "{", "[1, 2]", '"llama"', '{"model_type": "llama",}', "{'model_type': 'llama'}",
])
def test_text_that_is_not_a_config_is_refused(browser, text):
    page = browser.new_page()
    page.add_script_tag(path=str(SCRIPT))
    r = page.evaluate("t => attnlabCalculator.compute(t, {context: 1n, cacheDtype: 'bf16', "
                      "stateDtype: 'auto', memory: null})", text)
    page.close()
    assert not r["ok"] and r["message"].startswith(("config.json: not valid JSON", "config:"))
    try:
        architecture_from_config(json.loads(text), params_total=10**9)
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        assert r["error"] == type(error).__name__ or r["message"].startswith("config.json")
    else:
        raise AssertionError("the package read it")


def test_the_presets_are_what_the_package_holds_now():
    run = subprocess.run([sys.executable, "tools/calculator_presets.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_every_preset_reads_as_its_published_model(browser):
    """The presets pasted into the page are the published models: the same layers and bytes."""
    from attnlab.configs import PUBLISHED

    page = browser.new_page()
    page.add_script_tag(path=str(PRESETS))
    presets = page.evaluate("window.ATTNLAB_CALCULATOR_PRESETS")
    page.close()
    by_name = {p["name"]: p["text"] for p in presets}
    assert set(PUBLISHED) <= set(by_name)
    assert set(by_name) - set(PUBLISHED) == {k for k in VALID if "/" in k}
    for name, model in PUBLISHED.items():
        arch = architecture_from_config(json.loads(by_name[name]), params_total=10**9)
        assert arch.layer_pattern == model.layer_pattern, name
        for context in (1, 4096, 10**6):
            assert (sequence_bytes(arch, context).total_bytes
                    == sequence_bytes(model, context).total_bytes), name


def test_bytes_are_written_as_the_package_writes_them(browser):
    """format_bytes: one decimal in decimal and binary units, ties included (1280 B)."""
    values = [0, 999, 1000, 1023, 1024, 1250, 1280, 1_048_576 * 5 // 4, 10**6 - 1, 10**6,
              999_950, 1_150_000, 1_350_000, 2_250_000, 2**30, 704_643_072, 10**15]
    values += [k * 50_000 for k in range(1, 400)]  # every x.x5 MB: not ties in binary
    values += [sequence_bytes(architecture_from_config(json.loads(text), params_total=10**9),
                              context).total_bytes
               for text in released().values() for context in CONTEXTS]
    page = browser.new_page()
    page.add_script_tag(path=str(SCRIPT))
    shown = page.evaluate("vs => vs.map(v => attnlabCalculator.formatBytes(BigInt(v)))",
                          [str(v) for v in values])
    page.close()
    assert shown == [format_bytes(v) for v in values]

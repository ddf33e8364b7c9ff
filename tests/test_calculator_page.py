"""The calculator page of the built website (calculator.md), as a reader uses it in headless
Chromium: every preset gives the package's bytes, a bad config is refused with the package's
message, every control has a label, the page reads on a 390-px phone without sideways scrolling,
and no other page loads the calculator's scripts. (tests/test_calculator_parity.py compares the
script with the package on thousands of inputs without a build.) The Chinese edition's calculator
(zh/calculator.html), the same script with its words in Chinese, is held to the same checks."""

from __future__ import annotations

import json
import re

import pytest
from attnlab import configs
from attnlab.configs import architecture_from_config
from attnlab.serving import sequence_bytes
from test_site import HTML, PAGES, open_page

pytestmark = pytest.mark.site

PAGE = "calculator.html"
#: The calculator in each edition, and how each says that a config was refused
EDITIONS = {PAGE: "Refused ({error}): {message}", f"zh/{PAGE}": "已拒绝（{error}）：{message}"}


def preset_texts(page) -> dict[str, str]:
    return {p["name"]: p["text"] for p in page.evaluate("window.ATTNLAB_CALCULATOR_PRESETS")}


def shown_bytes(page) -> dict[str, list[int]]:
    """Each row of the result table: its cache, state, conv and total bytes."""
    return page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('.calc-table tr[data-kind]')]"
        ".map(r => [r.dataset.kind, [...r.querySelectorAll('td[data-bytes]')]"
        ".map(c => Number(c.dataset.bytes))]))")


@pytest.mark.parametrize("calculator", EDITIONS)
def test_every_preset_shows_the_packages_bytes(browser, base_url, calculator):
    page, log = open_page(browser, f"{base_url}/{calculator}")
    try:
        texts = preset_texts(page)
        assert set(configs.PUBLISHED) <= set(texts)
        context = int(page.input_value("#calc-context"))
        for name, text in texts.items():
            page.click(f'.calc-preset[data-preset="{name}"]')
            assert page.get_attribute(f'.calc-preset[data-preset="{name}"]',
                                      "aria-pressed") == "true"
            arch = architecture_from_config(json.loads(text), params_total=10**9)
            seq = sequence_bytes(arch, context)
            expected = {}
            for layer in seq.layers:
                row = expected.setdefault(layer.kind, [0, 0, 0, 0])
                for i, n in enumerate((layer.cache_bytes, layer.state_bytes, layer.conv_bytes,
                                       layer.total)):
                    row[i] += n
            assert shown_bytes(page) == expected, name
            total = page.get_attribute(".calc-table tfoot td:last-child", "data-bytes")
            assert int(total) == seq.total_bytes, name
    finally:
        page.close()
    assert not log["errors"] and not log["failed"] and not log["external"], log


@pytest.mark.parametrize("calculator", EDITIONS)
def test_a_bad_config_is_refused_with_the_packages_message(browser, base_url, calculator):
    page, log = open_page(browser, f"{base_url}/{calculator}")
    try:
        bad = {**configs.LLAMA3_8B_CONFIG, "hidden_size": 4096.0}
        page.fill("#calc-config", json.dumps(bad))
        shown = page.text_content("#calc-result .calc-error")
        with pytest.raises(TypeError) as error:
            architecture_from_config(bad, params_total=10**9)
        assert shown == EDITIONS[calculator].format(error="TypeError", message=error.value)
        page.fill("#calc-config", json.dumps({**bad, "model_type": "gpt2"}))
        assert "model_type 'gpt2' is not one" in page.text_content("#calc-result .calc-error")
    finally:
        page.close()
    assert not log["errors"], log


@pytest.mark.parametrize("calculator", EDITIONS)
def test_every_control_has_a_label_and_the_types_read_are_the_packages(
        browser, base_url, calculator):
    page, _ = open_page(browser, f"{base_url}/{calculator}")
    try:
        unlabelled = page.evaluate(
            "() => [...document.querySelectorAll('#attnlab-calculator input, "
            "#attnlab-calculator select, #attnlab-calculator textarea')]"
            ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))"
            ".map(e => e.id)")
        assert not unlabelled
        listed = page.text_content("#calc-model-types").split(", ")
        assert tuple(listed) == configs._MODEL_TYPES
    finally:
        page.close()


@pytest.mark.parametrize("calculator", EDITIONS)
def test_the_page_reads_on_a_390_px_phone(browser, base_url, calculator):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(f"{base_url}/{calculator}", wait_until="load")
        for name in ("Jamba 1.5 Mini", "Kimi-Linear-48B-A3B", "google/gemma-3-27b-it"):
            page.click(f'.calc-preset[data-preset="{name}"]')
            sideways = page.evaluate(
                "() => [document.documentElement.scrollWidth - document.documentElement"
                ".clientWidth, ...[...document.querySelectorAll('.calc-table-wrap')]"
                ".map(w => w.scrollWidth - w.clientWidth)]")
            assert max(sideways) <= 0, (name, sideways)
            smallest = page.evaluate(
                "() => Math.min(...[...document.querySelectorAll('#calc-result *')]"
                ".map(e => parseFloat(getComputedStyle(e).fontSize)))")
            assert smallest >= 11, (name, smallest)
    finally:
        page.close()


def test_the_chinese_calculator_says_its_results_in_chinese(browser, base_url):
    """Kinds, layout and notes in Chinese; only names (MLA, Mamba, softmax) stay as they are."""
    page, log = open_page(browser, f"{base_url}/zh/{PAGE}")
    try:
        english = {}
        for name in ("Jamba 1.5 Mini", "Kimi-Linear-48B-A3B", "google/gemma-3-27b-it"):
            page.click(f'.calc-preset[data-preset="{name}"]')
            shown = page.evaluate(
                "() => [...document.querySelectorAll('.calc-summary, .calc-kind, .calc-count, "
                ".calc-notes li')].map(e => e.textContent.replace(/^[^：]*：/, ''))")
            english[name] = [t for t in shown if re.search(r"(?<![\w-])(?!softmax)[a-z]{3,}", t)]
        assert not any(english.values()), english
    finally:
        page.close()
    assert not log["errors"], log


def test_no_other_page_loads_the_calculator():
    assert set(EDITIONS) <= set(PAGES)
    loading = [rel for rel in PAGES if rel not in EDITIONS and re.search(
        r"<script[^>]*\ssrc=\"[^\"]*calculator(_presets)?\.js",
        (HTML / rel).read_text(encoding="utf-8"))]
    assert not loading

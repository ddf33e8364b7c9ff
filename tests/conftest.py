"""Shared test settings and helpers: a hypothesis profile sized for a 2-core machine, the one
``assert_close`` every numeric test uses, shared hypothesis strategies, and the headless Chromium
(Debian's, driven by playwright: no browser download) of the site and lab tests.

Test modules import the helpers with ``from conftest import assert_close, seeds``.
"""

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st

CHROMIUM = os.environ.get("ATTNLAB_CHROMIUM", "/usr/bin/chromium")

settings.register_profile("course", deadline=None, max_examples=25, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))
torch.set_num_threads(1)

TOLERANCES = {torch.float64: 1e-10, torch.float32: 1e-4}
"""Named tolerances of ``assert_close``: the largest error allowed on O(1) values per dtype
(float64: two forms of one computation agree to rounding; float32: to its ~7 digits after the
rounding of long sums)."""

seeds = st.integers(0, 2**31 - 1)
#: Kernel input sizes (B, H, T, Dk, Dv): T up to 70 crosses a 64-token chunk boundary.
shapes = st.tuples(
    st.integers(1, 2),  # B
    st.integers(1, 2),  # H
    st.integers(1, 70),  # T
    st.integers(1, 8),  # Dk
    st.integers(1, 8),  # Dv
)
"""Seeds for ``torch.Generator().manual_seed`` in property tests."""


def randn(*shape: int, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.Tensor:
    """A standard normal tensor of ``shape`` from its own generator seeded by ``seed``."""
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def decode_in_pieces(layer, x: torch.Tensor, cuts, **options):
    """Run a layer over x ``[B, T, d]`` in pieces cut at ``cuts``, carrying its cache; return
    ``(outputs concatenated [B, T, d], final cache)``. ``options`` go to every call."""
    cache, pieces = None, []
    for start, stop in zip([0, *cuts], [*cuts, x.shape[1]], strict=True):
        y, cache = layer(x[:, start:stop], cache, use_cache=True, **options)
        pieces.append(y)
    return torch.cat(pieces, dim=1), cache


def assert_close(actual, expected, *, tol: float | None = None) -> None:
    """Assert that ``actual`` equals ``expected`` to ``tol`` (default: ``TOLERANCES`` by dtype),
    relative to the largest entry of ``expected`` when that exceeds 1:

        max |actual - expected| <= tol · max(1, max |expected|)

    Shapes and dtypes must match and ``actual`` must be finite; tuples and lists are compared
    element by element (e.g. a ``(state, normaliser)`` pair).
    """
    if isinstance(expected, tuple | list):
        assert len(actual) == len(expected), f"{len(actual)} items, expected {len(expected)}"
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, tol=tol)
        return
    assert actual.shape == expected.shape, (
        f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype}, expected {expected.dtype}"
    assert torch.isfinite(actual).all(), "actual has NaN or inf"
    if expected.numel() == 0:
        return
    tol = TOLERANCES[expected.dtype] if tol is None else tol
    magnitude = max(1.0, expected.abs().max().item())
    error = (actual - expected).abs().max().item()
    assert error <= tol * magnitude, f"max error {error:.3g} > {tol:.0e} x {magnitude:.3g}"


@pytest.fixture
def one_thread():
    """Run a test on one torch thread (training is bit-reproducible per machine only so)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session, with nothing that phones home."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )
        yield b
        b.close()


@pytest.fixture(scope="session")
def base_url():
    """The built site (``_build/html``, or ``$ATTNLAB_SITE/html``) served on 127.0.0.1."""
    html = Path(os.environ.get("ATTNLAB_SITE", Path(__file__).resolve().parents[1] / "_build"))
    html = html / "html"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(html))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()

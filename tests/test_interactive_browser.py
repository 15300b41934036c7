"""The interactive report in a real browser: headless Chromium driven by Playwright.

Opt-in (``pytest -m browser`` or ``tox -e browser``): it needs Debian's chromium at
/usr/bin/chromium (``apt-get install -y chromium``; ``CRFOPT_CHROMIUM`` names another
binary) and playwright (``pip install playwright``; its own browser download is not
used). Screenshots go to ``CRFOPT_SHOTS`` when set, else to the test's tmp folder. CI
(``.ci/run``) installs both and sets ``CRFOPT_REQUIRE_BROWSER=1``, under which a missing
browser fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import crfopt
from crfopt.apps.cli import main

pytestmark = pytest.mark.browser

OPTIMIZERS = ["lbfgs", "sdca", "sdca-gap"]
CHROMIUM = os.environ.get("CRFOPT_CHROMIUM", "/usr/bin/chromium")
# no network, no first-run or background traffic: the page must work offline
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(reason: str) -> None:
    """Skip, or fail where the browser must be there (CI sets CRFOPT_REQUIRE_BROWSER=1
    after installing it: a skip would pass a test that never ran)."""
    if os.environ.get("CRFOPT_REQUIRE_BROWSER", "") not in ("", "0"):
        pytest.fail(f"CRFOPT_REQUIRE_BROWSER is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        _unavailable(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium "
            "(or set CRFOPT_CHROMIUM to a Chromium binary)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install 'crfopt[browser]' (or playwright)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    """crfopt report (the CLI) on a small comparison: 3 optimizers, 2 seeds."""
    base = tmp_path_factory.mktemp("browser")
    crfopt.compare(
        "synthetic",
        OPTIMIZERS,
        seeds=[0, 1],
        passes=3,
        out=base / "res",
        problem_params={"synthetic": {"n": 60}},
    )
    res = CliRunner().invoke(
        main, ["report", str(base / "res"), "--out", str(base / "report"), "--format", "png"]
    )
    assert res.exit_code == 0, res.output
    return base / "report" / "interactive.html"


@pytest.fixture
def shots(tmp_path):
    out = Path(os.environ.get("CRFOPT_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def page(browser, page_file):
    pg = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # nothing may leave the machine: any http(s) request fails the test
    requests: list[str] = []
    pg.on("request", lambda r: requests.append(r.url) if r.url.startswith("http") else None)
    pg.goto(page_file.as_uri())
    pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
    yield pg
    assert errors == [], errors
    assert requests == [], requests
    pg.close()


def _traces(pg) -> list[dict]:
    return pg.evaluate(
        """() => document.getElementById('plot').data.map(t => ({
            name: t.name, group: t.legendgroup, visible: t.visible, n: t.x.length,
            x0: t.x[0], fill: t.fill || null,
            symbol0: t.marker && Array.isArray(t.marker.symbol) ? t.marker.symbol[0] : null}))"""
    )


def _text(pg, selector: str) -> str:
    return pg.locator(selector).first.text_content() or ""


def _legend(pg) -> list[str]:
    return [t.strip() for t in pg.locator("#plot .legendtext").all_text_contents()]


def _wait_redraw(pg, selector: str, old: str) -> str:
    pg.wait_for_function(
        "([s, old]) => document.querySelector(s) && document.querySelector(s).textContent !== old",
        arg=[selector, old],
        timeout=10_000,
    )
    return _text(pg, selector)


def test_page_loads_with_every_optimizer(page, shots):
    assert sorted(_legend(page)) == OPTIMIZERS
    traces = _traces(page)
    assert {t["group"] for t in traces} == set(OPTIMIZERS)
    # seed bands stay: one filled band per optimizer on the passes axis
    assert sorted(t["group"] for t in traces if t["fill"] == "toself") == OPTIMIZERS
    assert "effective passes" in _text(page, "#plot .g-xtitle")
    assert "sub-optimality" in _text(page, "#plot .g-ytitle")
    page.screenshot(path=str(shots / "interactive-default.png"), full_page=True)


def test_switching_the_x_axis_redraws(page, shots):
    before = _traces(page)
    old = _text(page, "#plot .g-xtitle")
    page.select_option("#xaxis", "time_s")
    assert _wait_redraw(page, "#plot .g-xtitle", old) == "optimizer time (s), init + iterations"
    after = _traces(page)
    # every run alone on the seconds axis: no bands, one line per run (2 seeds each)
    assert not [t for t in after if t["fill"]]
    for opt in OPTIMIZERS:
        assert sum(t["group"] == opt and t["name"] == opt for t in after) >= 2
    assert [t["x0"] for t in after] != [t["x0"] for t in before]
    # the ◇ sits on each dual run's own start (after its setup() work), not on a median
    starts = {t["group"]: t["symbol0"] for t in after if t["name"] in OPTIMIZERS}
    assert starts == {"lbfgs": "circle", "sdca": "diamond-open", "sdca-gap": "diamond-open"}
    assert not [t for t in after if "start after init" in t["name"]]
    assert sorted(_legend(page)) == OPTIMIZERS
    page.screenshot(path=str(shots / "interactive-seconds.png"), full_page=True)
    old = _text(page, "#plot .g-xtitle")
    page.select_option("#xaxis", "oracle_calls")
    assert "oracle calls" in _wait_redraw(page, "#plot .g-xtitle", old)


def test_switching_the_quantity_redraws(page, shots):
    old = _text(page, "#plot .g-ytitle")
    page.select_option("#yquantity", "relative_gap")
    assert _wait_redraw(page, "#plot .g-ytitle", old) == "duality gap / P(0)"
    assert page.is_checked("#ylog")  # a gap opens on a log scale
    assert page.evaluate("document.getElementById('plot')._fullLayout.yaxis.type") == "log"
    page.screenshot(path=str(shots / "interactive-gap.png"), full_page=True)
    # L-BFGS has no gap estimate: it is left out, and the page says so
    old = _text(page, "#plot .g-ytitle")
    page.select_option("#yquantity", "relative_gap_estimate")
    _wait_redraw(page, "#plot .g-ytitle", old)
    assert sorted(_legend(page)) == ["sdca", "sdca-gap"]
    assert "lbfgs" in _text(page, "#notes")
    # test error opens on a linear scale
    old = _text(page, "#plot .g-ytitle")
    page.select_option("#yquantity", "test_error")
    _wait_redraw(page, "#plot .g-ytitle", old)
    assert page.evaluate("document.getElementById('plot')._fullLayout.yaxis.type") == "linear"
    page.uncheck("#xlog") if page.is_checked("#xlog") else page.check("#xlog")
    page.wait_for_function("document.getElementById('plot')._fullLayout.xaxis.type === 'log'")


def test_toggling_an_optimizer_hides_it(page):
    page.uncheck("#optimizers input[value='sdca']")
    page.wait_for_function(
        "document.getElementById('plot').data"
        ".filter(t => t.legendgroup === 'sdca').every(t => t.visible === false)"
    )
    assert sorted(_legend(page)) == ["lbfgs", "sdca-gap"]
    others = [t for t in _traces(page) if t["group"] != "sdca"]
    assert others and all(t["visible"] is True for t in others)
    # a click on a legend entry toggles through the same state as the checkbox
    page.locator("#plot .legend .traces", has_text="lbfgs").locator(".legendtoggle").click()
    page.wait_for_function("!document.querySelector(\"#optimizers input[value='lbfgs']\").checked")
    assert _legend(page) == ["sdca-gap"]
    page.check("#optimizers input[value='sdca']")
    page.wait_for_function(
        "document.getElementById('plot').data"
        ".filter(t => t.legendgroup === 'sdca').every(t => t.visible === true)"
    )


def test_hovering_a_point_shows_run_seed_and_parameters(page):
    # sdca alone, so no other method's point lies under the mouse
    for opt in ("lbfgs", "sdca-gap"):
        page.uncheck(f"#optimizers input[value='{opt}']")
    page.wait_for_function("document.querySelectorAll('#plot .legendtext').length === 1")
    # the screen position of sdca's last plotted run point, from plotly's own axes
    pos = page.evaluate(
        """() => {
        const gd = document.getElementById('plot'), L = gd._fullLayout;
        const t = gd.data.find(t => t.legendgroup === 'sdca' && t.mode === 'markers');
        const i = t.x.length - 1, box = gd.getBoundingClientRect();
        return {x: box.left + L.xaxis._offset + L.xaxis.l2p(L.xaxis.d2l(t.x[i])),
                y: box.top + L.yaxis._offset + L.yaxis.l2p(L.yaxis.d2l(t.y[i])),
                run: t.meta[0], seed: String(t.meta[1])};
        }"""
    )
    page.mouse.move(pos["x"] - 30, pos["y"] - 30)
    page.mouse.move(pos["x"], pos["y"])
    page.wait_for_selector("#plot .hoverlayer .hovertext", timeout=10_000)
    label = " ".join(page.locator("#plot .hoverlayer .hovertext").all_text_contents())
    assert f"run {pos['run']}" in label and f"seed {pos['seed']}" in label, label
    # the variant's resolved parameters (SDCA has some), as key=value
    assert "=" in label, label

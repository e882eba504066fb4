"""The notebook display, rendered by a real browser: what is drawn, not only the HTML.

``astad.display.html`` is rendered by headless Chromium in three settings: a plain page,
a page whose stylesheet does what notebook front ends do to output HTML (JupyterLab gives
``pre`` and ``code`` the surrounding text font when its variables say so, ``pre-wrap``
and a line height of its own; the hostile version here adds ``word-break: break-all`` and
a proportional font), and a narrow page. A script in the page measures what the browser
drew (computed fonts, the widths of drawn glyphs, the boxes of every row, the lines of
text in each row, scroll widths, the folded helpers before and after a click) and the
test asserts on those measurements.

The browser is Chromium from the system's packages. Without it the tests skip, unless
``ASTAD_REQUIRE_BROWSER=1`` (CI sets it, and installs Chromium): then they fail.
"""
from __future__ import annotations

import html as _html
import json
import math
import os
import re
import shutil
import subprocess

import pytest

import astad
from astad import display

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=10000"]


def _browser() -> str:
    path = os.environ.get("ASTAD_CHROMIUM") or next(
        (found for name in BROWSERS if (found := shutil.which(name))), None)
    if path is None:
        message = ("no Chromium to render the display with (apt-get install chromium, or "
                   "set ASTAD_CHROMIUM)")
        if os.environ.get("ASTAD_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; ASTAD_REQUIRE_BROWSER=1 requires it")
        pytest.skip(message)
    return path


# -- functions to display ---------------------------------------------------------------
@astad.reverse_diff
def loss(w, b, xs, ys):
    total = 0.0
    for x, y in zip(xs, ys):
        err = math.tanh(w * x + b) - y
        if err > 0.0:
            total += err * err
        else:
            total -= 0.5 * err
        total = total * 0.99 + math.sin(w) * 1e-3
    return total / len(xs) + 0.01 * (w * w + b * b)


@astad.reverse_diff
def long_lines(first_parameter_with_a_long_name, second_parameter_with_a_long_name):
    intermediate_value_with_a_long_name = math.exp(first_parameter_with_a_long_name) * math.sin(second_parameter_with_a_long_name)  # noqa: E501
    return intermediate_value_with_a_long_name * first_parameter_with_a_long_name


# -- the page ---------------------------------------------------------------------------
# What a notebook front end's stylesheet does to output HTML, made worse: the text font
# for code, wrapping anywhere, its own line height and colours.
NOTEBOOK_CSS = """
.jp-RenderedHTMLCommon { font-family: 'DejaVu Serif', serif; font-size: 14px;
  line-height: 1.7; color: #333; padding-right: 20px; }
.jp-RenderedHTMLCommon pre, .jp-RenderedHTMLCommon code { font-family: inherit;
  font-size: inherit; line-height: 1.9; white-space: pre-wrap; word-break: break-all;
  padding: 0; border: 0; background-color: #fff; }
.jp-RenderedHTMLCommon :not(pre) > code { padding: 1px 5px; }
.jp-RenderedHTMLCommon div, .jp-RenderedHTMLCommon span { font-family: inherit; }
.jp-RenderedHTMLCommon > *:last-child { margin-bottom: 0.5em; }
"""

MEASURE = r"""
function rowsOf(container) {
  return [...container.querySelectorAll(".astad-row")].map(row => {
    const box = row.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(row);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    return {top: box.top, height: box.height, width: box.width, text: row.textContent,
            lines: tops.size, right: range.getBoundingClientRect().right};
  });
}
function glyphWidths(pre) {
  const row = pre.querySelector(".astad-row");
  const narrow = document.createElement("span"), wide = document.createElement("span");
  narrow.textContent = "iiiiiiiiii"; wide.textContent = "MMMMMMMMMM";
  row.append(narrow, wide);
  const widths = [narrow.getBoundingClientRect().width, wide.getBoundingClientRect().width];
  narrow.remove(); wide.remove();
  return widths;
}
function fontsOf(root) {
  return [...root.querySelectorAll("pre, code, .astad-row span")].map(
    e => getComputedStyle(e).fontFamily);
}
function measure(root) {
  const panes = [...root.querySelectorAll(".astad-columns > .astad-pane")];
  const out = {
    title: root.querySelector(".astad-title").textContent,
    fonts: fontsOf(root),
    glyphs: [...root.querySelectorAll(".astad-columns pre")].map(glyphWidths),
    left: rowsOf(panes[0]), right: rowsOf(panes[1]),
    panes: panes.map(p => ({overflowX: getComputedStyle(p).overflowX,
                            scrollWidth: p.scrollWidth, clientWidth: p.clientWidth,
                            left: p.getBoundingClientRect().left,
                            right: p.getBoundingClientRect().right})),
  };
  const details = root.querySelector("details");
  if (details) {
    const helpers = details.querySelector("pre");
    out.closed = {open: details.open, drawn: helpers.getClientRects().length,
                  height: details.getBoundingClientRect().height,
                  summary: details.querySelector("summary").textContent};
    details.querySelector("summary").click();
    out.opened = {open: details.open, drawn: helpers.getClientRects().length,
                  rows: rowsOf(helpers), glyphs: glyphWidths(helpers)};
  }
  return out;
}
document.fonts.ready.then(() => {
  const results = {};
  for (const block of document.querySelectorAll("[data-case]"))
    results[block.dataset.case] = measure(block.querySelector(".astad-source"));
  const pre = document.createElement("pre");
  pre.id = "astad-results";
  pre.textContent = JSON.stringify(results);
  document.body.append(pre);
});
"""


def _page(cases: dict) -> str:
    blocks = "".join(f'<div data-case="{name}" {attributes}>{display.html(f)}</div>'
                     for name, (f, attributes) in cases.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{NOTEBOOK_CSS}"
            f"</style></head><body style='margin: 16px; font-family: serif'>{blocks}"
            f"<script>{MEASURE}</script></body></html>")


def render(tmp_path, cases: dict, screenshot: str | None = None) -> dict:
    """Render the cases in Chromium; the page's own measurements, by case."""
    browser = _browser()
    page = tmp_path / "display.html"
    page.write_text(_page(cases))
    command = [browser, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
               "--window-size=1200,2400"]
    if screenshot:
        subprocess.run(command + [f"--screenshot={screenshot}", page.as_uri()],
                       capture_output=True, timeout=120)
    result = subprocess.run(command + ["--dump-dom", page.as_uri()], capture_output=True,
                            text=True, timeout=120)
    found = re.search(r'<pre id="astad-results">(.*?)</pre>', result.stdout, re.S)
    assert found, f"the page measured nothing:\n{result.stdout[-2000:]}\n{result.stderr}"
    return json.loads(_html.unescape(found.group(1)))


CASES = {
    "plain": (loss, "style='width: 1100px'"),
    "notebook": (loss, "class='jp-OutputArea-output jp-RenderedHTMLCommon' "
                       "style='width: 1100px'"),
    "narrow": (loss, "class='jp-OutputArea-output jp-RenderedHTMLCommon' "
                     "style='width: 420px'"),
    "long": (long_lines, "class='jp-OutputArea-output jp-RenderedHTMLCommon' "
                         "style='width: 900px'"),
}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("browser")
    shot = os.environ.get("ASTAD_DISPLAY_SCREENSHOT")  # to look at it: a .png path
    return render(tmp_path, CASES, screenshot=shot)


@pytest.mark.parametrize("case", list(CASES))
def test_every_code_element_is_drawn_in_a_monospace_font(drawn, case):
    measured = drawn[case]
    assert measured["fonts"] and all("monospace" in font for font in measured["fonts"])
    for narrow, wide in measured["glyphs"]:  # ten i's as wide as ten M's
        assert narrow > 0 and abs(narrow - wide) < 0.5, (narrow, wide)
    if "opened" in measured:
        narrow, wide = measured["opened"]["glyphs"]
        assert narrow > 0 and abs(narrow - wide) < 0.5


@pytest.mark.parametrize("case", list(CASES))
def test_the_two_columns_are_level_row_by_row(drawn, case):
    left, right = drawn[case]["left"], drawn[case]["right"]
    assert len(left) == len(right) > 5
    for a, b in zip(left, right):
        assert a["top"] == b["top"] and a["height"] == b["height"] > 0
    # each original statement on the row of the comment astad wrote for it
    statements = {row["text"].split("  ", 1)[1].strip(): row["top"] for row in left
                  if row["text"].strip() and "  " in row["text"]}
    comments = [row for row in right if row["text"].strip().startswith("# ")]
    assert comments
    for row in comments:
        assert statements[row["text"].strip()[2:]] == row["top"], row["text"]


@pytest.mark.parametrize("case", list(CASES))
def test_no_row_wraps_wide_code_scrolls_sideways(drawn, case):
    measured = drawn[case]
    rows = measured["left"] + measured["right"] + measured.get("opened", {}).get("rows", [])
    assert all(row["lines"] <= 1 for row in rows), \
        [row["text"] for row in rows if row["lines"] > 1]
    for pane in measured["panes"]:
        assert pane["overflowX"] in ("auto", "scroll")
    left, right = measured["panes"]
    assert left["right"] <= right["left"]  # side by side, not overlapping
    if case in ("narrow", "long"):
        # wider than their column: drawn whole, inside a pane that scrolls sideways
        assert right["scrollWidth"] > right["clientWidth"]
        widest = max(row["right"] for row in measured["right"])
        assert widest > right["right"]
    if case == "long":
        assert left["scrollWidth"] > left["clientWidth"]


@pytest.mark.parametrize("case", ["plain", "notebook", "narrow"])
def test_helpers_are_folded_until_opened(drawn, case):
    measured = drawn[case]
    closed, opened = measured["closed"], measured["opened"]
    assert closed["open"] is False and closed["drawn"] == 0
    # the paper's transform is shown first; folded below it, the code that runs: loss
    # with one fused rule per float statement (err, the two updates of total, the decayed
    # total, the result), then the code specialised for floats, reverse and forward
    assert closed["summary"].startswith("8 more functions generated by astad")
    assert "loss as it runs, _line" in closed["summary"]
    assert closed["summary"].endswith(", loss_floats, loss_jvp")
    assert opened["open"] is True and opened["drawn"] > 0
    defs = [row["text"] for row in opened["rows"] if row["text"].startswith("def ")]
    assert len(defs) == 8 and defs[0].startswith("def loss(_tape, w, b, xs, ys)")
    assert all(text.startswith("def _line") for text in defs[1:6])
    assert defs[6].startswith("def loss_floats(") and defs[7].startswith("def loss_jvp(")
    generated = [row["text"].strip() for row in measured["right"] if row["text"].strip()]
    assert generated[0].startswith("def loss(_tape, w, b, xs, ys)")
    assert not any(text.startswith("def _line") for text in generated)


def test_the_title_names_the_file_and_line(drawn):
    first = loss.__code__.co_firstlineno
    assert drawn["plain"]["title"].startswith("loss (")
    assert drawn["plain"]["title"].endswith(f"test_display_browser.py:{first})")

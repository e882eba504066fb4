"""The notebook display, rendered by a real browser: what is drawn, not only the HTML.

``astad.display.html`` is rendered by headless Chromium in three settings: a plain page,
a page whose stylesheet does what notebook front ends do to output HTML (JupyterLab gives
``pre`` and ``code`` the surrounding text font when its variables say so, ``pre-wrap``
and a line height of its own; the hostile version here adds ``word-break: break-all`` and
a proportional font), and a narrow page. A script in the page measures what the browser
drew (computed fonts, the widths of drawn glyphs, the boxes of every row and of every
character in it, the lines of text in each row, scroll widths, the text a copy of each
column gives, the folded helpers before and after a click) and the test asserts on
those measurements.

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
from test_helper_source import norm_of, with_helpers  # (the model of a function with helpers)

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
    intermediate_value_with_a_long_name = math.exp(first_parameter_with_a_long_name) * math.sin(second_parameter_with_a_long_name) + math.cos(first_parameter_with_a_long_name * second_parameter_with_a_long_name)  # noqa: E501
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
function charBoxes(row) {
  // the box of every character drawn in the row (spaces left out)
  const boxes = [];
  const walker = document.createTreeWalker(row, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const number = node.parentElement.closest(".astad-number") !== null;
    for (let i = 0; i < node.textContent.length; i++) {
      if (node.textContent[i] === " ") continue;
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const r = range.getBoundingClientRect();
      boxes.push({left: r.left, right: r.right, top: Math.round(r.top), number});
    }
  }
  return boxes;
}
function rowsOf(container, pane) {
  // pane: the box whose visible part (its padding box) the text must be in
  const outer = pane.getBoundingClientRect();
  const visible = {left: outer.left + pane.clientLeft,
                   right: outer.left + pane.clientLeft + pane.clientWidth};
  return [...container.querySelectorAll(".astad-row")].map(row => {
    const box = row.getBoundingClientRect();
    const chars = charBoxes(row);
    const tops = [...new Set(chars.map(c => c.top))].sort((a, b) => a - b);
    const code = chars.filter(c => !c.number);
    const first = code.filter(c => c.top === tops[0]);
    const later = code.filter(c => c.top !== tops[0]);
    const numbers = chars.filter(c => c.number);
    return {top: box.top, height: box.height, bottom: box.bottom, text: row.textContent,
            lines: tops.length,
            hidden: chars.filter(c => c.left < visible.left - 0.5 ||
                                      c.right > visible.right + 0.5).length,
            codeLeft: first.length ? Math.min(...first.map(c => c.left)) : null,
            continuationLeft: later.length ? Math.min(...later.map(c => c.left)) : null,
            numberRight: numbers.length ? Math.max(...numbers.map(c => c.right)) : null,
            mark: getComputedStyle(row).backgroundImage};
  });
}
function glyphWidths(pre) {
  const row = pre.querySelector(".astad-row");
  const narrow = document.createElement("span"), wide = document.createElement("span");
  narrow.textContent = "iiiiiiiiii"; wide.textContent = "MMMMMMMMMM";
  narrow.style.whiteSpace = wide.style.whiteSpace = "nowrap";  // (a narrow column wraps)
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
    left: rowsOf(panes[0], panes[0]), right: rowsOf(panes[1], panes[1]),
    copied: panes.map(p => p.querySelector("pre").innerText),
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
    const pane = helpers.parentElement;
    out.opened = {open: details.open, drawn: helpers.getClientRects().length,
                  rows: rowsOf(helpers, pane), glyphs: glyphWidths(helpers),
                  scrollWidth: pane.scrollWidth, clientWidth: pane.clientWidth};
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
    "helpers": (with_helpers, "class='jp-OutputArea-output jp-RenderedHTMLCommon' "
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
        assert a["top"] == b["top"] and a["height"] > 0 and b["height"] > 0
    # a row is as tall as its taller side (a wrapped line): the next row starts below both
    for a, b, after in zip(left, right, left[1:]):
        assert abs(after["top"] - max(a["bottom"], b["bottom"])) < 0.5
    # each original statement on the row of the comment astad wrote for it
    statements = {row["text"].split("  ", 1)[1].strip(): row["top"] for row in left
                  if row["text"].strip() and "  " in row["text"]}
    comments = [row for row in right if row["text"].strip().startswith("# ")]
    assert comments
    for row in comments:
        assert statements[row["text"].strip()[2:]] == row["top"], row["text"]


@pytest.mark.parametrize("case", list(CASES))
def test_long_lines_wrap_with_every_character_in_view(drawn, case):
    measured = drawn[case]
    rows = measured["left"] + measured["right"] + measured.get("opened", {}).get("rows", [])
    # every character drawn inside its column, and nothing beyond it to scroll to
    assert all(row["hidden"] == 0 for row in rows), \
        [row["text"] for row in rows if row["hidden"]]
    panes = measured["panes"] + ([measured["opened"]] if "opened" in measured else [])
    for pane in panes:
        assert pane["scrollWidth"] <= pane["clientWidth"]
    left, right = measured["panes"]
    assert left["right"] <= right["left"]  # side by side, not overlapping
    if case in ("narrow", "long"):  # wider than their columns: wrapped, in both
        assert any(row["lines"] > 1 for row in measured["left"])
        assert any(row["lines"] > 1 for row in measured["right"])
    if case == "plain":  # (1100 pixels: the original fits)
        assert all(row["lines"] <= 1 for row in measured["left"])
    glyph = measured["glyphs"][0][0] / 10
    wrapped = [row for row in rows if row["lines"] > 1]
    for row in wrapped:
        # a continuation starts four columns right of its line's code, beside a mark
        indent = len(row["text"]) - len(row["text"].lstrip(" "))
        if row["numberRight"] is None and indent <= 16:
            assert abs(row["continuationLeft"] - row["codeLeft"] - 4 * glyph) < 1, row
        assert row["continuationLeft"] >= row["codeLeft"] + 4 * glyph - 1, row
        assert "linear-gradient" in row["mark"]
    # the line numbers stay in their gutter: right-aligned, and no text below them
    numbered = [row for row in measured["left"] if row["numberRight"] is not None]
    assert numbered and len({round(row["numberRight"]) for row in numbered}) == 1
    gutter = numbered[0]["numberRight"]
    assert all(row["codeLeft"] > gutter for row in numbered if row["codeLeft"] is not None)
    assert all(row["continuationLeft"] > gutter for row in numbered
               if row["continuationLeft"] is not None)


def test_a_long_original_line_is_drawn_whole(drawn):
    # over 200 characters: drawn on several lines of one row, all in view
    row = next(row for row in drawn["long"]["left"] if "math.cos(" in row["text"])
    assert len(row["text"]) > 200 and row["lines"] >= 3 and row["hidden"] == 0


def test_the_helpers_a_function_calls_are_shown_once_each(drawn):
    measured = drawn["helpers"]
    summary = measured["closed"]["summary"]
    rule = norm_of.__code__.co_firstlineno + 1  # (its preaccumulated rule, by its line)
    assert summary.endswith(f"with_helpers_jvp; the helpers it calls: norm_of, _line{rule}, "
                            "scaled, squared")
    texts = [row["text"] for row in measured["opened"]["rows"]]
    call = with_helpers.__code__.co_firstlineno + 2  # (the line of d = norm_of(x, y))
    assert [text for text in texts if text.startswith("# helper: ")] == [
        f"# helper: norm_of (called at line {call})",
        f"# helper: scaled (called at line {call + 1})",
        f"# helper: squared (called at line {call + 1})"]
    for name in ("norm_of", "scaled", "squared"):
        assert sum(text.startswith(f"def {name}(_tape, ") for text in texts) == 1


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


@pytest.mark.parametrize("case, function", [("plain", loss), ("long", long_lines)])
def test_a_column_copies_as_its_own_lines(drawn, case, function):
    # each column is one block: a copy of it has its own lines, whole (a wrapped line
    # stays one line), none of the other column's
    original, generated, _ = display.sources(function)
    left, right = drawn[case]["copied"]
    digits = len(str(original[-1][0]))
    assert [line.rstrip() for line in left.split("\n") if line.strip()] == \
        [f"{n:>{digits}}  {text}".rstrip() for n, text in original]
    assert [line.rstrip() for line in right.split("\n") if line.strip()] == \
        [line.rstrip() for line in generated.split("\n# what runs")[0].split("\n")
         if line.strip()]

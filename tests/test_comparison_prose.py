"""The hand-written sentences of docs/comparison.md agree with its speed table.

The table itself is rendered from the benchmark results (tests/test_docs.py); the prose
under it ("What the figures say") quotes figures from it by hand. Every figure quoted
must be in the table, and each range the prose gives (a peer's times over astad's, the
gradient-over-primal ratios) must be the column's real minimum and maximum, so that a new
benchmark run cannot leave the prose saying something the table contradicts.
"""
from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "comparison.md"
TABLE_BEGIN = "<!-- speed table: rendered from benchmarks/results/peers.json -->"
TABLE_END = "<!-- end of speed table -->"


def _sections():
    text = PAGE.read_text()
    table = text[text.index(TABLE_BEGIN):text.index(TABLE_END)]
    prose = text[text.index("What the figures say:"):]
    prose = prose[:prose.index("\nThe test suite")]
    return table, " ".join(prose.split())  # sentences joined across line breaks


def _rows(table: str) -> tuple[list, list]:
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return header, rows


def _ratios(header, rows, column: str) -> list:
    """The "(N×)" figures of a peer's column: its time over astad's, where it ran."""
    k = header.index(column)
    return [float(m.group(1)) for row in rows
            if (m := re.search(r"\(([\d.]+)×\)", row[k]))]


def _per_primal(header, rows, program=None) -> list:
    k = header.index("astad grad / primal")
    return [float(row[k]) for row in rows if program is None or row[0] == program]


def test_every_figure_in_the_prose_is_in_the_table():
    table, prose = _sections()
    figures = re.findall(r"\d+(?:\.\d+)?×|\d+(?:\.\d+)? (?:µs|ms|s)\b|\b\d+\.\d+\b", prose)
    assert len(figures) > 10
    missing = [figure for figure in figures
               if not re.search(r"(?<![\d.])" + re.escape(figure) + r"(?![\d])", table)]
    assert not missing, f"docs/comparison.md: the prose quotes figures the table does not " \
                        f"have (a new benchmark run?): {missing}"


def test_the_ranges_in_the_prose_are_the_tables():
    table, prose = _sections()
    header, rows = _rows(table)
    columns = {"PyTorch eager": "PyTorch eager", "autograd": "autograd",
               "JAX without `jit`": "JAX eager"}
    found = re.findall(r"(PyTorch eager|autograd|JAX without `jit`),? (?:takes )?"
                       r"([\d.]+)× to ([\d.]+)×", prose)
    assert {name for name, _, _ in found} == set(columns)
    for name, low, high in found:
        ratios = _ratios(header, rows, columns[name])
        assert (float(low), float(high)) == (min(ratios), max(ratios)), name
        # "faster than every eager peer, in every row"
        assert min(ratios) > 1.0 and "every eager peer, in every row" in prose

    low, high = re.search(r"costs ([\d.]+) to ([\d.]+) times its own primal", prose).groups()
    ratios = _per_primal(header, rows)
    assert (float(low), float(high)) == (min(ratios), max(ratios))
    for program in ("dot", "sum_matvec"):
        low, high = re.search(rf"for `{program}`(?: it is)? between ([\d.]+) and ([\d.]+)",
                              prose).groups()
        ratios = _per_primal(header, rows, program)
        assert (float(low), float(high)) == (min(ratios), max(ratios)), program


def test_jit_sentences_match_their_rows():
    table, prose = _sections()
    header, rows = _rows(table)
    jit = header.index("JAX jit")
    chain = next(row for row in rows if row[0] == "chain")
    ratio, jax_time, astad_time = re.search(
        r"runs the `chain` recursion in ([\d.]+)× astad's time \(([\d.]+ \S+) against "
        r"([\d.]+ \S+)\)", prose).groups()
    assert chain[jit] == f"{jax_time} ({ratio}×)" and chain[header.index("astad")] == \
        astad_time
    for program in ("fanout", "rotate_vec_by_quat_dataclass"):
        row = next(row for row in rows if row[0] == program)
        quoted = re.search(rf"`{program}`\s+\(([\d.]+)×\)", prose).group(1)
        assert row[jit].endswith(f"({quoted}×)"), program
    # "slower on the other programs it can trace"
    others = [float(m.group(1)) for row in rows if row[0] not in
              ("chain", "fanout", "rotate_vec_by_quat_dataclass")
              if (m := re.search(r"\(([\d.]+)×\)", row[jit]))]
    assert others and min(others) > 1.0

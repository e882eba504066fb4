"""The same program laid out as people and formatters write it, for the layout fuzz
(tests/test_layouts.py): ``black`` and ``ruff format`` at a narrow line length, and a
random re-layout that splits statements at legal points (inside brackets, with comments
and blank lines; elsewhere with backslashes), wraps values in parentheses and may indent
with tabs. Every layout is the same program: only positions change."""
from __future__ import annotations

import io
import random
import subprocess
import sys
import tokenize

_OPEN, _CLOSE = "([{", ")]}"


def black(source: str, line_length: int = 40) -> str | None:
    """``source`` as black formats it (None when black is not installed)."""
    try:
        import black as black_module
    except ImportError:
        return None
    return black_module.format_str(source, mode=black_module.Mode(line_length=line_length))


def ruff_format(source: str, line_length: int = 40) -> str | None:
    """``source`` as ``ruff format`` writes it (None when ruff is not installed)."""
    try:
        done = subprocess.run([sys.executable, "-m", "ruff", "format", "--line-length",
                               str(line_length), "--stdin-filename", "program.py", "-"],
                              input=source, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def relayout(source: str, rng: random.Random, tabs: bool = False) -> str:
    """``source`` with every logical line rewritten token by token: the value of each
    ``return`` and assignment in parentheses, and between tokens a line break (inside
    brackets, with a comment or a blank line now and then) or a backslash continuation
    (outside), at random; its indentation in tabs if ``tabs``."""
    out = []
    for line in _logical_lines(source):
        indent, tokens = line
        tokens = _parenthesised(tokens)
        text, depth = "", 0
        for k, tok in enumerate(tokens):
            if k:
                r = rng.random()
                if depth > 0 and r < 0.35:
                    comment = "  # a comment" if rng.random() < 0.2 else ""
                    blank = "\n" if rng.random() < 0.1 else ""
                    text += f"{comment}\n{blank}" + " " * rng.randint(0, 13)
                elif depth == 0 and r < 0.12 and tokens[k - 1] != "@":
                    text += " \\\n" + " " * rng.randint(0, 9)
                else:
                    text += " "
            text += tok
            depth += tok in _OPEN
            depth -= tok in _CLOSE
        lead = "\t" * (len(indent) // 4) if tabs else indent
        out.append(lead + text)
    return "\n".join(out) + "\n"


def _logical_lines(source: str) -> list:
    """(indentation, token strings) of each logical line, comments dropped."""
    lines, current, indent = [], [], ""
    depth_stack = [""]
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == tokenize.INDENT:
            depth_stack.append(tok.string)
        elif kind == tokenize.DEDENT:
            depth_stack.pop()
        elif kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if current:
                lines.append((indent, current))
            current = []
        elif kind in (tokenize.NL, tokenize.COMMENT):
            continue
        else:
            if not current:
                indent = depth_stack[-1]
            current.append(tok.string)
    return lines


def _parenthesised(tokens: list) -> list:
    """``return v`` and ``target = v`` (also augmented) with ``v`` in parentheses, so
    that the value may be split anywhere."""
    if tokens[0] == "return" and len(tokens) > 1:
        return ["return", "("] + tokens[1:] + [")"]
    depth = 0
    for k, tok in enumerate(tokens):
        depth += tok in _OPEN
        depth -= tok in _CLOSE
        if depth == 0 and tok in ("=", "+=", "-=", "*=", "/=") and k + 1 < len(tokens) \
                and tokens[0] not in ("def", "for", "while", "if", "elif", "with",
                                      "lambda", "class"):
            return tokens[:k + 1] + ["("] + tokens[k + 1:] + [")"]
    return tokens


def layouts(source: str, seed: int) -> dict:
    """Every layout of ``source`` this machine can write: {name: source}."""
    rng = random.Random(seed)
    found = {"black": black(source), "ruff format": ruff_format(source),
             "split": relayout(source, rng), "split, tabs": relayout(source, rng, tabs=True)}
    return {name: text for name, text in found.items() if text is not None}

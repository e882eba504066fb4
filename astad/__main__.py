"""The command line: ``python -m astad show|check FILE.py:FUNCTION ...`` and ``info``.

    python -m astad info                                  # versions, runtime, peers
    python -m astad show model.py:loss                    # the generated code
    python -m astad show --original model.py:loss         # with the original beside it
    python -m astad check model.py:loss 0.5 0.1 "[1.0, 2.0]" "[0.3, 0.8]"

Exit status: 0 when the command did what was asked (``check``: the gradient agrees with
finite differences), 1 when ``check`` finds a mismatch or astad refuses the function or
its arguments, 2 for a usage error (a target that cannot be found or loaded, an argument
that is not a literal). When the reader of the output goes away (``... | head``), the
command stops quietly with status 141, as a Unix tool killed by SIGPIPE does.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import signal
import sys
import traceback
import types

_DESCRIPTION = """\
astad: exact reverse-mode gradients of plain Python functions by source transformation.

A TARGET names a function: FILE.py:NAME (the file is loaded as a module) or
package.module:NAME (imported). NAME may be dotted (Class.method). A function that is not
decorated with @astad.reverse_diff is decorated here."""

_EPILOG = """\
examples:
  python -m astad info
  python -m astad show model.py:loss
  python -m astad show --original model.py:loss
  python -m astad check model.py:loss 0.5 0.1 "[1.0, 2.0]" "[0.3, 0.8]"
  python -m astad check model.py:predict "array([[1.0, 2.0], [3.0, 4.0]])" --argnums 0

exit status: 0 success, 1 gradient mismatch or an astad error, 2 usage error."""

_CHECK_ARGS = """\
the function's positional arguments, each a Python literal: floats, ints, strings, None,
lists, tuples and dicts of them ("[1.0, 2.0]", "{'w': 0.5}"), or array(LITERAL) for a
float numpy array. Put -- before the arguments if one starts with '-' and is not a plain
number (-- -1e-3)."""


class UsageError(Exception):
    """A target or argument the command line cannot use (exit status 2)."""


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and the parser of each command."""
    parser = argparse.ArgumentParser(
        prog="python -m astad", description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    show = commands.add_parser(
        "show", help="print the code astad generates for a function",
        description="Print the Python code astad generates for a function (its .source).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("target", metavar="TARGET", help="FILE.py:NAME or module:NAME")
    show.add_argument("--original", action="store_true",
                      help="print the original source beside (or above) the generated code")
    show.add_argument("--width", type=int, default=None,
                      help="with --original: the width to fit two columns in "
                           "(default: the terminal's)")
    show.add_argument("--no-preaccumulate", action="store_true",
                      help="the plain transform: one tape entry per primitive operation")

    check = commands.add_parser(
        "check", help="check a function's gradient against central finite differences",
        description="Run astad.testing.check_grads: compare astad's gradient of the function "
                    "at the given arguments with central finite differences.",
        epilog=_CHECK_ARGS, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("target", metavar="TARGET", help="FILE.py:NAME or module:NAME")
    check.add_argument("args", metavar="ARG", nargs="*", help="a positional argument (a "
                       "Python literal, see below)")
    check.add_argument("--kwarg", metavar="NAME=LITERAL", action="append", default=[],
                       help="a keyword argument (passed through, never differentiated); "
                            "repeat for several")
    check.add_argument("--argnums", metavar="K[,K...]", default=None,
                       help="the positional arguments to differentiate, e.g. 0 or 0,2 "
                            "(default: the decorator's, or all)")
    check.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance "
                       "(default 1e-5)")
    check.add_argument("--atol", type=float, default=1e-7, help="absolute tolerance "
                       "(default 1e-7)")
    check.add_argument("--eps", type=float, default=1e-6, help="finite-difference step, "
                       "relative to max(1, |x|) (default 1e-6)")
    check.add_argument("--max-elements", type=int, default=20,
                       help="array elements checked one by one per array (default 20)")
    check.add_argument("--seed", type=int, default=0, help="seed of the random choices "
                       "(default 0)")
    info = commands.add_parser(
        "info", help="print versions, the runtime in use and why, and the peers installed",
        description="Print astad's version and location, Python's, numpy's and gast's, the "
                    "runtime in use (the compiled or the Python sweeps) and why, and the "
                    "optional peers found. Paste it into a bug report.")
    return parser, {"show": show, "check": check, "info": info}


# -- loading the target ---------------------------------------------------------------------
def _load_file(path: str) -> types.ModuleType:
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else \
        f"_astad_cli_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so that the file's own imports of its neighbours work
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise UsageError(f"loading {path} raised an exception:\n"
                         + "".join(traceback.format_exception(exc)).rstrip()) from None
    return module


def _load(target: str):
    """The object TARGET names: FILE.py:NAME or module:NAME (NAME may be dotted)."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"a target is FILE.py:NAME or module:NAME, got {target!r}")
    if where.endswith(".py") or os.sep in where or (os.altsep and os.altsep in where) \
            or os.path.isfile(where):
        module = _load_file(where)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise UsageError(f"cannot import {where!r}: {exc}") from None
    obj = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{where} has no attribute {name!r}") from None
    return obj


def _decorated(obj, target: str, preaccumulate: bool = True):
    """``obj`` if astad decorated it (it has ``grad``), else ``obj`` decorated now."""
    import astad
    if hasattr(obj, "grad") and callable(getattr(obj, "vjp", None)):
        if not preaccumulate:
            return astad.reverse_diff(obj.__wrapped__, preaccumulate=False)
        return obj
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if not isinstance(obj, types.FunctionType):
        raise UsageError(f"{target} is {type(obj).__name__} {obj!r}, not a Python function")
    return astad.reverse_diff(obj, preaccumulate=preaccumulate)


# -- literals -------------------------------------------------------------------------------
_ARRAY_PREFIXES = ("array(", "np.array(", "numpy.array(")


def _literal(text: str):
    """A Python literal, or ``array(LITERAL)`` for a float numpy array."""
    stripped = text.strip()
    for prefix in _ARRAY_PREFIXES:
        if stripped.startswith(prefix) and stripped.endswith(")"):
            import numpy as np
            return np.array(_literal(stripped[len(prefix):-1]), dtype=float)
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UsageError(f"{text!r} is not a Python literal (floats, lists, tuples, dicts, "
                         "... or array(...))") from None


def _argnums(text):
    if text is None:
        return None
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--argnums takes integers separated by commas, got {text!r}") \
            from None
    if not values:
        raise UsageError("--argnums needs at least one integer")
    return values[0] if len(values) == 1 and "," not in text else values


def _kwargs(items):
    kwargs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UsageError(f"--kwarg takes NAME=LITERAL, got {item!r}")
        kwargs[name.strip()] = _literal(value)
    return kwargs


# -- commands -------------------------------------------------------------------------------
def _show(options) -> int:
    from .errors import AstadError
    obj = _load(options.target)
    try:
        f = _decorated(obj, options.target, preaccumulate=not options.no_preaccumulate)
    except AstadError as exc:
        print(f"{type(exc).__module__}.{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if options.original:
        from .display import show
        show(f, width=options.width)
    else:
        print(f.source.rstrip("\n"))
    return 0


def _check(options) -> int:
    from .errors import AstadError
    from .testing import check_grads
    args = [_literal(text) for text in options.args]
    kwargs = _kwargs(options.kwarg)
    argnums = _argnums(options.argnums)
    obj = _load(options.target)
    try:
        f = _decorated(obj, options.target)
        result = check_grads(f, *args, rtol=options.rtol, atol=options.atol, eps=options.eps,
                             argnums=argnums, kwargs=kwargs,
                             max_elements=options.max_elements, seed=options.seed)
    except AssertionError as exc:
        print(f"FAILED: {exc}")
        return 1
    except AstadError as exc:
        print(f"{type(exc).__module__}.{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(result)
    return 0


_PEERS = ("scipy", "jax", "jaxlib", "autograd", "torch", "numba")


def _version(distribution: str) -> str | None:
    """An installed distribution's version, read from its metadata (importing jax or torch
    would take seconds), or None."""
    import importlib.metadata
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _info(options) -> int:
    import astad
    from .runtime import build_record, tape
    print(f"astad {astad.__version__}: {os.path.dirname(os.path.abspath(astad.__file__))}")
    print(f"Python {sys.version.split()[0]}: {sys.executable}")
    print(f"numpy {_version('numpy')}, gast {_version('gast')}")
    choice = os.environ.get("ASTAD_RUNTIME", "").strip()
    record = build_record.read()
    if record is None:
        built = "no build record (not installed by pip: a checkout on the path?)"
    else:
        built = f"{record.get('native')} (built for Python {record.get('python', '?')})"
    if tape.RUNTIME == "native":
        why = f"ASTAD_RUNTIME={choice}" if choice else "the default where it was built"
        print(f"runtime: native, the compiled sweep ({why})")
        print(f"  module: {tape.native.__file__}")
    else:
        why = (f"ASTAD_RUNTIME={choice}" if choice else
               "the compiled sweep (astad.runtime._native) cannot be imported")
        print(f"runtime: python, the pure-Python sweeps ({why})")
    print(f"  build: {built}")
    if build_record.failure(record) is not None:
        print("  to build the compiled sweep: install a C compiler and Python's headers, "
              "then reinstall astad; ASTAD_RUNTIME=python silences the warning")
    versions = {name: _version(name) for name in _PEERS}
    found = [f"{name} {version}" for name, version in versions.items() if version]
    missing = [name for name, version in versions.items() if not version]
    print(f"peers: {', '.join(found) or 'none'}"
          + (f" (not installed: {', '.join(missing)})" if missing else ""))
    return 0


def _parse(argv: list[str]) -> argparse.Namespace:
    """The options of ``argv``. A command's own parser reads everything after the command
    with ``parse_intermixed_args``, so options and positional arguments may come in any
    order (``check model.py:f --kwarg y=0.5 1.0``); argparse cannot intermix through
    subparsers."""
    parser, commands = _parser()
    if argv and argv[0] in commands:
        options = commands[argv[0]].parse_intermixed_args(argv[1:])
        options.command = argv[0]
        return options
    return parser.parse_args(argv)  # --help, no command, an unknown command: usage


# the status a shell reports for a process killed by SIGPIPE (128 + 13); Windows has none
_BROKEN_PIPE_STATUS = 128 + getattr(signal, "SIGPIPE", 13)


def main(argv: list[str] | None = None) -> int:
    options = _parse(sys.argv[1:] if argv is None else list(argv))
    try:
        status = {"show": _show, "check": _check, "info": _info}[options.command](options)
        sys.stdout.flush()  # now, so that a closed pipe is seen here and not at exit
        return status
    except UsageError as exc:
        print(f"python -m astad {options.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader has gone (`python -m astad show ... | head`). Send what is still
        # buffered to /dev/null, or the interpreter's own flush at exit would report the
        # broken pipe again (the recipe of the signal module's documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _BROKEN_PIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())

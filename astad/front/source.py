"""Phase 1, source: read a function's source text and parse it with gast.

The parsed tree keeps the user's own line numbers and columns (as they are in the
file), so every later error and every traceback through generated code points at the
user's file.

A function is found by its code object, not only by the line it was compiled at. That
line can be stale: IPython's ``%autoreload`` (its "deduperreload" mode) recompiles only
the functions whose text changed, from re-printed text, so after a line is inserted above
a function, the unchanged function's code still names its old line and a changed one names
a line of the re-printed text. When the definition is not where the code object says, the
whole file is searched: every definition with the function's name and parameters is a
candidate, and the one that compiles to the same code wins.
"""
from __future__ import annotations

import __future__
import ast
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass

import gast

from ..core.escape import nested_code
from ..errors import SourceUnavailableError
from .lambdas import lambdas_in


@dataclass
class ParsedFunction:
    """A function's syntax tree together with where it came from."""

    fn: object            # the Python function object
    node: gast.AST        # gast.FunctionDef or gast.Lambda, with file line numbers
    filename: str
    firstlineno: int


def _shift_columns(tree: gast.AST, indent: int) -> None:
    """Undo the dedent: make col_offset refer to the real file's columns."""
    if not indent:
        return
    for node in gast.walk(tree):
        for attr in ("col_offset", "end_col_offset"):
            if getattr(node, attr, None) is not None:
                setattr(node, attr, getattr(node, attr) + indent)


# -- code that travelled by value ------------------------------------------------------------
# cloudpickle (from 3.1.3) sends a function's code with the file name "<dynamic-code>", so
# that its bytes do not depend on where the function was defined. What astad sends along
# (pickling.source_bundle) names the file of each code object it may have to read, by
# what identifies the code on both sides: its name, first line and bytecode.
DYNAMIC_CODE = "<dynamic-code>"
TRAVELLED: dict = {}  # (co_name, co_firstlineno, co_code) -> the file it was defined in


def code_identity(code: types.CodeType) -> tuple:
    return code.co_name, code.co_firstlineno, code.co_code


def restore_filename(fn) -> None:
    """Give a Python function whose code travelled by value its file name back (nested
    code objects too), when astad sent it: its source is then found, and tracebacks and
    errors name the user's file again. The code runs exactly as before."""
    code = getattr(fn, "__code__", None)
    if type(code) is types.CodeType and code.co_filename == DYNAMIC_CODE:
        filename = TRAVELLED.get(code_identity(code))
        if filename is not None:
            fn.__code__ = _with_filename(code, filename)


def filename_of(fn) -> str | None:
    """The file ``fn``'s code was written in (after ``restore_filename``)."""
    restore_filename(fn)
    code = getattr(fn, "__code__", None)
    return code.co_filename if type(code) is types.CodeType else None


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_with_filename(c, filename) if type(c) is types.CodeType and
                   c.co_filename == DYNAMIC_CODE else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def parse_function(fn) -> ParsedFunction:
    """Parse ``fn``'s source; raise SourceUnavailableError when it cannot be read."""
    restore_filename(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise SourceUnavailableError(f"{fn!r} is not a Python function; astad reads source text")
    filename = code.co_filename
    try:
        # The source of the code that runs: for a function wrapped by a decorator that
        # uses functools.wraps, ``inspect.getsourcelines(fn)`` would follow __wrapped__
        # and give the wrapped function's source instead of the wrapper's.
        lines, firstlineno = inspect.getsourcelines(code)
    except (OSError, TypeError) as exc:
        linecache.checkcache(filename)
        if not linecache.getlines(filename, getattr(fn, "__globals__", None)):
            raise SourceUnavailableError(
                f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} "
                f"(defined in {filename}): {exc}. astad transforms source text, so the "
                "function must be defined in a file or a notebook cell." + _where_instead(filename)
            ) from None
        node = None  # a file shorter than the line the code names: search it
    else:
        node = _at_first_line(fn, lines, firstlineno)
    if node is None:  # not where the code object says: search the file for it
        node = _search_file(fn)
    linecache.checkcache(filename)
    return ParsedFunction(fn=fn, node=node, filename=filename, firstlineno=first_line(node))


def _where_instead(filename: str) -> str:
    """What to do when the source was typed where Python keeps none."""
    if filename in ("<stdin>", "<console>"):  # the plain REPL before 3.13 (3.13's keeps it)
        return (" At this interactive prompt Python keeps no source: put the function in a "
                "file and import it (python -i model.py keeps you at the prompt after), use "
                "IPython or a Jupyter notebook, or Python 3.13's prompt, which keeps source.")
    if filename == "<string>":
        return (" Code run by exec() or python -c has no source file: write it to a file "
                "and import it.")
    return ""


def first_line(node: gast.AST) -> int:
    """The first line of a definition: its first decorator's, as ``co_firstlineno``."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def definition_lines(fn) -> tuple[int, list[str]]:
    """``(first line number, lines)`` of ``fn``'s definition as the file has it now,
    decorators included (what :func:`parse_function` transforms)."""
    parsed = parse_function(fn)
    lines = linecache.getlines(parsed.filename, getattr(fn, "__globals__", None))
    end = getattr(parsed.node, "end_lineno", None) or parsed.firstlineno
    return parsed.firstlineno, [line.rstrip("\r\n") for line in
                                lines[parsed.firstlineno - 1:end]]


# -- where the code object says --------------------------------------------------------------
def _at_first_line(fn, lines: list, firstlineno: int):
    """The definition in ``lines`` (what ``inspect`` read at ``co_firstlineno``) if it is
    ``fn``'s: its name, first line and parameters agree with the code object; else None."""
    code = fn.__code__
    last_line = firstlineno + len(lines) - 1
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    try:
        module = gast.parse(dedented)
    except SyntaxError:
        # A lambda in the middle of an expression: getsourcelines returns whole lines that
        # may not parse on their own (e.g. the continuation of a call). Try wrapping.
        try:
            module = gast.parse("(\n" + dedented + "\n)")
            firstlineno -= 1
        except SyntaxError:
            # (a lambda that is a value in a multi-line dict literal: cut out alone)
            found = lambdas_in(text, firstlineno) if code.co_name == "<lambda>" else []
            if not found:
                return None
            module, indent, firstlineno = gast.Module(body=[gast.Expr(value=lam) for lam in
                                                            found], type_ignores=[]), 0, 1
    gast.increment_lineno(module, firstlineno - 1)
    _shift_columns(module, indent)
    if code.co_name == "<lambda>":
        matching = [lam for lam in gast.walk(module) if isinstance(lam, gast.Lambda)
                    and lam.lineno == code.co_firstlineno and _same_parameters(lam, code)]
        found = _one_lambda(fn, matching)
        if found is not None and found.end_lineno >= last_line:
            found = _whole_lambda(fn, found)
        return found
    candidates = [node for node in module.body if _is_def(node, code.co_name)] or \
        [node for node in gast.walk(module) if _is_def(node, code.co_name)]
    for node in candidates:
        if first_line(node) == code.co_firstlineno and _same_parameters(node, code):
            return node
    return None


def _whole_lambda(fn, found):
    """``found``, a lambda ending on the last line ``inspect`` gave, as the whole file has
    it: its body may go on past that line inside the brackets around it (black's layout
    of a long lambda, ``return (\n lambda v: f(v)\n * k\n)``), which the lines alone
    parse without."""
    filename = fn.__code__.co_filename
    text = "".join(linecache.getlines(filename, getattr(fn, "__globals__", None)))
    try:
        module = gast.parse(text)
    except SyntaxError:
        return found
    for node in gast.walk(module):
        if isinstance(node, gast.Lambda) and node.lineno == found.lineno and \
                node.col_offset == found.col_offset:
            return node
    return found


def _is_def(node, name: str) -> bool:
    return isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)) and node.name == name


def _same_parameters(node, code: types.CodeType) -> bool:
    """The parameter names of a def or lambda are those of ``code``, in order."""
    args = node.args
    names = [a.id for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg is not None:
        names.append(args.vararg.id)
    if args.kwarg is not None:
        names.append(args.kwarg.id)
    n = code.co_argcount + code.co_kwonlyargcount + \
        bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return names == list(code.co_varnames[:n])


def _one_lambda(fn, matching: list):
    """The lambda among alike ones on one line that is ``fn``."""
    code = fn.__code__
    if len(matching) > 1 and hasattr(code, "co_positions"):
        # (Python >= 3.11) the one whose body starts where the code's first instruction does
        starts = {(line, col) for line, _, col, _ in code.co_positions() if line is not None}
        matching = [lam for lam in matching
                    if (lam.body.lineno, lam.body.col_offset) in starts]
    elif len(matching) > 1:
        # (Python 3.10: no columns in code objects) the one that compiles to this code;
        # several that compile alike have the same text, so any of them is right
        matching = _best_by_code(fn, matching) or matching
    if not matching:
        return None
    if len({ast.dump(gast.gast_to_ast(lam)) for lam in matching}) > 1:
        raise SourceUnavailableError(
            f"cannot tell which lambda on {code.co_filename}:{code.co_firstlineno} is meant; "
            "define it with def, or put it on a line of its own")
    return matching[0]


# -- searching the file ----------------------------------------------------------------------
def _search_file(fn):
    """``fn``'s definition found anywhere in its file as the file is now."""
    code = fn.__code__
    filename = code.co_filename
    linecache.checkcache(filename)
    text = "".join(linecache.getlines(filename, getattr(fn, "__globals__", None)))
    try:
        module = gast.parse(text)
    except SyntaxError as exc:
        raise SourceUnavailableError(
            f"cannot parse the source of {fn.__qualname__!r} in {filename}: {exc}") from None
    lambda_ = code.co_name == "<lambda>"
    candidates = [(node, qualname) for node, qualname in _definitions(module)
                  if (isinstance(node, gast.Lambda) if lambda_ else _is_def(node, code.co_name))
                  and _same_parameters(node, code)]
    named = [node for node, qualname in candidates if qualname == fn.__qualname__]
    candidates = named or [node for node, _ in candidates]
    best = _best_by_code(fn, candidates, text)
    if not best:
        where = f"{filename}:{code.co_firstlineno}"
        if candidates:
            raise SourceUnavailableError(
                f"the source of {fn.__qualname__!r} in {filename} no longer matches the code "
                "that runs (the file has changed since the function was defined): reload its "
                "module (importlib.reload, or IPython's %autoreload) or run its cell again")
        raise SourceUnavailableError(
            f"cannot find the definition of {code.co_name!r} in its source ({where})")
    # of alike candidates, the one nearest the line the code object names
    return min(best, key=lambda node: abs(first_line(node) - code.co_firstlineno))


def _definitions(module: gast.Module):
    """(node, qualified name) of every def and lambda in a module, as ``__qualname__``
    spells them (``Outer.method``, ``f.<locals>.g``, ``f.<locals>.<lambda>``)."""
    stack = [(module, "")]
    while stack:
        node, prefix = stack.pop()
        for child in gast.iter_child_nodes(node):
            if isinstance(child, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
                name = "<lambda>" if isinstance(child, gast.Lambda) else child.name
                yield child, prefix + name
                stack.append((child, f"{prefix}{name}.<locals>."))
            elif isinstance(child, gast.ClassDef):
                stack.append((child, f"{prefix}{child.name}."))
            else:
                stack.append((child, prefix))


# -- comparing code objects ------------------------------------------------------------------
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_KIND_FLAGS = (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR
               | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR)


def _best_by_code(fn, candidates: list, text: str | None = None) -> list:
    """The candidates that compile to exactly ``fn``'s code, as the file has them or as
    re-printed by ``ast.unparse`` (what IPython's deduperreload compiles)."""
    code = fn.__code__
    if text is None:
        linecache.checkcache(code.co_filename)
        text = "".join(linecache.getlines(code.co_filename, getattr(fn, "__globals__", None)))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    by_position = {(type(node).__name__, node.lineno, node.col_offset): node
                   for node in ast.walk(tree) if isinstance(node, _DEFINITIONS)}
    wanted = _key(code)
    owner = _owner(fn.__qualname__)
    # the file's own imports: Python >= 3.11 compiles `math.sin(x)` differently when
    # `math` is a module-level import (an attribute load, not a method call)
    imports = [node for node in tree.body if isinstance(node, ast.Import) or (
        isinstance(node, ast.ImportFrom) and node.module != "__future__")]
    same = []
    for candidate in candidates:
        node = by_position.get((type(candidate).__name__, candidate.lineno,
                                candidate.col_offset))
        if node is None:
            continue
        # deduperreload compiles the re-printed definition alone, without the imports
        reprinted = ast.parse(textwrap.dedent(ast.unparse(node))).body[0]
        reprinted = reprinted.value if isinstance(reprinted, ast.Expr) else reprinted
        if any(compiled is not None and _key(compiled) == wanted
               for compiled in (_compile_alone(node, code, owner, imports),
                                _compile_alone(reprinted, code, owner, []))):
            same.append(candidate)
    return same


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_TYPE_PARAMS = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}


def _key(code: types.CodeType) -> tuple:
    """What identifies compiled code apart from where it was compiled: instructions,
    names, variables and constants (nested code compared the same way)."""
    consts = tuple(_key(c) if isinstance(c, types.CodeType) else (type(c), repr(c))
                   for c in code.co_consts)
    return (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
            code.co_flags & _KIND_FLAGS, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_names, consts, code.co_code)


def _owner(qualname: str):
    """The innermost class a function is defined in, from its qualified name
    (``Model.loss.<locals>.<lambda>``: ``Model``), or None."""
    parts = qualname.split(".")[:-1]
    classes = [part for k, part in enumerate(parts)
               if part != "<locals>" and (k + 1 == len(parts) or parts[k + 1] != "<locals>")]
    return classes[-1] if classes and classes[-1].isidentifier() else None


def _compile_alone(node: ast.AST, code: types.CodeType, owner, imports: list):
    """The code object a def or lambda (a standard ``ast`` node, with its own line
    numbers) compiles to in a scope like that of ``code``: after the module's
    ``imports``, its free variables bound in an enclosing function, inside a class of the
    owner's name for a method (private-name mangling, the ``__class__`` cell of
    ``super()``). None if it cannot be compiled."""
    body = [node] if not isinstance(node, ast.Lambda) else \
        [ast.Assign(targets=[ast.Name("__astad_candidate__", ast.Store())], value=node)]
    if owner or "__class__" in code.co_freevars:
        body = [ast.ClassDef(name=owner or "__astad_owner__", bases=[], keywords=[],
                             body=body, decorator_list=[], **_TYPE_PARAMS)]
    free = [name for name in code.co_freevars if name != "__class__"]
    if free:
        body.insert(0, ast.Assign(targets=[ast.Name(name, ast.Store()) for name in free],
                                  value=ast.Constant(None)))
    scope = ast.FunctionDef(name="__astad_scope__", args=ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
        defaults=[]), body=body, decorator_list=[], returns=None, **_TYPE_PARAMS)
    # (the wrappers take line 1; the candidate keeps its own lines, which its code uses)
    module = ast.fix_missing_locations(ast.Module(body=[*imports, scope], type_ignores=[]))
    try:
        compiled = compile(module, code.co_filename, "exec", code.co_flags & _FUTURE_FLAGS,
                           dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):
        return None
    found = [c for c in nested_code(compiled) if c.co_name == code.co_name]
    return found[0] if len(found) == 1 else None



"""Phase 6, codegen: turn the transformed tree into a Python function, and cache it.

The generated function keeps the user's line numbers and file name, so a traceback
through it shows the user's own source lines. It is built inside a small factory so that
astad's runtime namespace (``ad``) and the user's closure variables are closure cells:
the user's cells are shared, not copied, so the generated code sees later rebinding of
those variables exactly as the original does.

``.source`` is printed with the standard library's ``ast.unparse`` (astor cannot print
``match`` statements and has had no release since 2019), with one comment per original
line, so generated code can be read beside the user's.
"""
from __future__ import annotations

import ast
import copy
import linecache
import re
import threading
import types
import weakref

import gast

from ..front import fence
from ..front.activity import bound_names
from ..runtime.tape import _native
from .calls import GENERATED_CODE, calls_as_is, resolvable_function
from ..front.normalize import normalize
from ..registry import RECORDS, ad
from ..rules.scalar import rule_namespace
from ..front.source import parse_function
from ..transform.reverse import CALL_AS_IS, MISSING, Names, transform

_COMMENT_MARK = "@astad-comment@"


UNBUILT = object()  # (what is written only when first asked for)


class Transformed:
    """A transformed function: callable as ``rev(tape, *args, **kwargs)``."""

    def __init__(self, rev, source: str, dependencies: list, floats=None, arity: int = -1,
                 specialised: str = ""):
        self.rev = rev
        # the transformed function with its fused rules, then the code specialised for floats
        self.transformed_source = source
        self.specialised_source = specialised
        self.source = source + ("\n\n" + specialised if specialised else "")
        self.dependencies = dependencies
        # straight-line functions: ``floats(*args) -> (value, gradients)`` for a call with
        # ``arity`` float arguments (straightline.py); None otherwise
        self.floats = floats
        self.arity = arity
        self.tapes = False  # does ``floats`` build a tape (scalarloops.py)?
        # forward mode on float arguments: ``jvp_floats(*args, *tangents) -> (value,
        # tangent)`` or None (forward/floats.py), and its text
        self.jvp_floats = None
        self.forward_source = None
        # the same without its checks, when every argument is a float (forward/floats.py)
        self.jvp_unchecked = None
        # Hessian-vector products on float arguments (forward/hvp.py), written when first
        # asked for: ``(function, plans, text, found)``, None if it cannot be written
        self.hvp = UNBUILT

    def still_valid(self) -> bool:
        """False once a binding this code was specialised on has changed. A dependency
        is (namespace, name, value): a global, a callable's record (no rule may be
        registered later for a callee called directly), or an attribute of a callee (its
        ``__code__``, ``__defaults__``, a class's ``__init__``), its namespace then a weak
        reference to it: the cache of transformed code must not keep it alive."""
        return unchanged(self.dependencies, MISSING)


def unchanged(dependencies: list, missing) -> bool:
    """Is every dependency ``(namespace, name, value)`` still bound so? A namespace is a
    dict or a weak reference to an object, whose attribute is read (compiled in
    runtime/_native.c where it is built)."""
    for namespace, name, value in dependencies:
        if type(namespace) is weakref.ref:
            obj = namespace()
            if (missing if obj is None else getattr(obj, name, missing)) is not value:
                return False
        elif namespace.get(name, missing) is not value:
            return False
    return True


python_unchanged = unchanged  # (the reference the compiled one is tested on)
if _native is not None:
    unchanged = _native.unchanged


# (id(fn), preaccumulate, as_method) -> Transformed, dropped when fn is: a function made
# at run time (a closure over a large array, say) must not be kept alive by astad
_cache: dict = {}
_lock = threading.RLock()
_building: set = set()  # functions being transformed now, by this thread (under _lock)


class _Callees:
    """D of the callables a function calls by a global name, resolved when it is
    transformed, so a call costs one Python call instead of an ``ad.rev`` lookup:

    - a dataclass or named tuple (D is the class itself): called as written;
    - the function itself (a recursion): its transformed version, directly;
    - another plain Python function: its transformed version, built now (a function
      still being built, as in a mutual recursion, is left to ``ad.rev``).

    Each answer depends on the global binding (recorded by transform), on no rule being
    registered for the callee later: its record), and on the callee's own code and
    dependencies: if any changes, the caller is rebuilt as a whole."""

    def __init__(self, fn, preaccumulate: bool, as_method: bool, names: Names):
        self.fn, self.preaccumulate, self.as_method = fn, preaccumulate, as_method
        self.names = names
        self.functions: dict = {}  # name in generated code -> transformed function
        self._named: dict = {}  # id(callee) -> that name

    def __call__(self, callee):
        try:
            no_rule = [(RECORDS, callee, RECORDS.get(callee, MISSING))]
        except TypeError:  # unhashable
            return None
        if calls_as_is(callee):
            return CALL_AS_IS, no_rule
        if not resolvable_function(callee):
            return None
        decorated = getattr(callee, "_astad_transformed", None)  # its own preaccumulate
        preaccumulate = True if decorated is None else \
            getattr(getattr(decorated, "__self__", None), "_preaccumulate", None)
        if preaccumulate is None:  # not api.DiffFunction's: leave it to ad.rev
            return None
        code_of = [(weakref.ref(callee), "__code__", callee.__code__)]
        if callee is self.fn:
            if self.as_method or preaccumulate != self.preaccumulate:
                return None
            return self.names.factory_def, no_rule
        if callee in _building:
            return None
        try:
            entry = transformed(callee, preaccumulate)
        except Exception:  # noqa: BLE001 (ad.rev meets the same error when it is called)
            return None
        name = self._named.get(id(callee))
        if name is None:
            name = self._named[id(callee)] = self.names.fresh(f"D_{callee.__name__}")
            self.functions[name] = entry.rev
        return name, no_rule + code_of + entry.dependencies


def transformed(fn, preaccumulate: bool = True, as_method: bool = False) -> Transformed:
    """The cached transformation of ``fn``, rebuilt if a global it resolved has changed.

    ``as_method``: the tape is the second parameter, after ``self`` (calls.rev)."""
    entry = cached(fn, preaccumulate, as_method)
    if entry is not None:
        return entry
    key = (id(fn), preaccumulate, as_method)
    with _lock:
        entry = _cache.get(key)
        if entry is None or entry.code is not fn.__code__ or entry.function() is not fn \
                or not entry.still_valid():
            entry = build(fn, preaccumulate, as_method)
            entry.function = weakref.ref(fn)
            if key not in _cache:
                weakref.finalize(fn, _cache.pop, key, None)
            _cache[key] = entry
    return entry


def cached(fn, preaccumulate: bool = True, as_method: bool = False):
    """The transformation of ``fn`` if it is cached and still valid, else None (then
    ``transformed`` builds it, for a function astad may transform)."""
    entry = _cache.get((id(fn), preaccumulate, as_method))  # (fn is alive, so an entry
    if entry is not None and entry.code is fn.__code__ and (  # under its id is its own)
            not entry.dependencies or unchanged(entry.dependencies, MISSING)):
        return entry
    return None


def transformed_function(fn, as_method: bool = False):
    return transformed(fn, as_method=as_method).rev


def build(fn, preaccumulate: bool = True, as_method: bool = False) -> Transformed:
    with _lock:
        _building.add(fn)
        try:
            return _build(fn, preaccumulate, as_method)
        finally:
            _building.discard(fn)


def front(fn):
    """The shared front end (front/): ``fn``'s source parsed, fenced and normalized, as
    ``(parsed, node, local_names, names)``; raises what cannot be differentiated."""
    parsed = parse_function(fn)
    node = parsed.node
    if isinstance(node, gast.Lambda):
        body = [gast.copy_location(gast.Return(value=node.body), node.body)]
        node = gast.copy_location(gast.FunctionDef(
            name="_lambda", args=node.args, body=body, decorator_list=[], returns=None,
            type_comment=None, type_params=[]), node)
    fence.check(node, parsed.filename)
    local_names = bound_names(node)
    all_names = {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}
    names = Names(all_names | local_names | set(fn.__code__.co_names), fn.__name__)
    normalize(node, names.temp)
    return parsed, node, bound_names(node), names


def _build(fn, preaccumulate: bool, as_method: bool) -> Transformed:
    parsed, node, local_names, names = front(fn)
    callees = _Callees(fn, preaccumulate, as_method, names)
    node, dependencies, rules, straight, forward, guards = transform(
        node, fn, local_names, names, preaccumulate, as_method, parsed.filename, callees)
    # ``rev`` copies the defaults now: a new __defaults__ tuple must rebuild it (and its
    # callers, which include these dependencies), as a call of ``fn`` would use it
    dependencies += [(weakref.ref(fn), name, getattr(fn, name))
                     for name in ("__defaults__", "__kwdefaults__")
                     if getattr(fn, name) is not None]
    dependencies = _distinct(dependencies)
    function_ast = gast.gast_to_ast(node)
    ast.fix_missing_locations(function_ast)
    compiled_rules = _compile_rules(rules, parsed.filename)
    rev = _compile(function_ast, fn, parsed.filename, names,
                   {**compiled_rules, **callees.functions, **guards})
    source = render(function_ast, parsed.filename)
    for _, rule in rules:
        line = linecache.getline(parsed.filename, rule.lineno).strip()
        source += (f"\n\n# line {rule.lineno}, preaccumulated: {line}\n"
                   f"# one tape entry with the partials of the whole expression\n"
                   + ast.unparse(rule) + "\n")
    floats, arity, specialised = None, fn.__code__.co_argcount, ""
    if straight is not None:
        function, text = straight
        floats = _compile_rules([(function.name, function)], parsed.filename)[function.name]
        # a traceback through it names the user's function, as one through ``rev`` does
        floats.__code__ = floats.__code__.replace(co_name=fn.__name__)
        said = re.match(r"\s*# every argument (.*?): ", text.split("\n")[1])
        kinds = said.group(1) if said else "a float"
        specialised = ("# specialised for float arguments: value_and_grad and grad run this "
                       f"when every argument is {kinds}\n" + text)
    entry = Transformed(rev, source, dependencies, floats, arity, specialised)
    if forward is not None:  # forward/floats.py: forward mode on float arguments
        function, text, unchecked = forward
        entry.jvp_floats = _compile_rules([(function.name, function)],
                                          parsed.filename)[function.name]
        entry.jvp_floats.__code__ = entry.jvp_floats.__code__.replace(co_name=fn.__name__)
        entry.forward_source = text
        if unchecked is not None:
            entry.jvp_unchecked = _compile_rules([(unchecked.name, unchecked)],
                                                 parsed.filename)[unchecked.name]
            entry.jvp_unchecked.__code__ = entry.jvp_unchecked.__code__.replace(
                co_name=fn.__name__)
    # the code it was built from: rebuilt when the function's __code__ is replaced
    # (IPython's autoreload does that to the functions a module already defined)
    entry.code = fn.__code__
    entry.tapes = straight is not None and "gradient_of(" in straight[1]
    return entry


def readable_source(fn, entry: Transformed, preaccumulate: bool) -> str:
    """What ``f.source`` shows: first the code of the paper's transform as a reader
    expects it (one rule call per primitive operation, ``preaccumulate=False``), then,
    each named as such, the code that actually runs: the same with each float expression
    one tape entry (statement-level preaccumulation), the code specialised for float
    arguments, and forward mode's code for float arguments."""
    unfused = transformed(fn, False).transformed_source if preaccumulate else None
    parts = [entry.source]
    if unfused is not None and unfused != entry.transformed_source:
        # the paper's transform first (what a reader looks at first), then what runs
        parts = [unfused, "# what runs: the same, with each float expression one tape entry "
                          "(statement-level preaccumulation)\n" + entry.source]
    if entry.forward_source is not None:
        parts.append("# forward mode (section 2), specialised for float arguments: jvp runs "
                     "this when every primal and tangent is a float or a list of floats\n"
                     + entry.forward_source)
    return "\n\n".join(part.rstrip("\n") for part in parts) + "\n"


def _distinct(dependencies: list) -> list:
    seen, out = set(), []
    for namespace, name, value in dependencies:
        key = (id(namespace), id(name), id(value))  # (one weak reference per object)
        if key not in seen:
            seen.add(key)
            out.append((namespace, name, value))
    return out


def _compile_rules(rules: list, filename: str) -> dict:
    """Compile the fused rules (fuse.py) with astad's rule namespace as their globals (and
    the callees each was written for, which it checks: fuse.py)."""
    if not rules:
        return {}
    namespace = rule_namespace()
    for _, rule in rules:
        namespace.update(getattr(rule, "astad_callees", {}))
    module = ast.Module(body=[rule for _, rule in rules], type_ignores=[])
    code = compile(module, filename, "exec", dont_inherit=True)
    exec(code, namespace)  # astad's own templates; no user text
    compiled = {name: namespace[name] for name, _ in rules}
    for function in compiled.values():
        _remember(function.__code__)
    return compiled


def _compile(function_ast: ast.FunctionDef, fn, filename: str, names: Names,
             rules: dict):
    user_freevars = list(fn.__code__.co_freevars)
    # Inside the factory the def gets a name of astad's own, so that a recursive call by
    # the user's name still reaches the global (or the user's closure cell), not this def.
    display_name = function_ast.name
    function_ast = copy.copy(function_ast)
    function_ast.name = names.factory_def
    prelude = [ast.Assign(targets=[ast.Name(n, ast.Store())], value=ast.Constant(None))
               for n in [names.ad] + list(rules) + user_freevars]
    factory = ast.FunctionDef(
        name="_astad_factory", args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                                                  kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                  defaults=[]),
        body=prelude + [function_ast, ast.Return(ast.Name(function_ast.name, ast.Load()))],
        decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:  # Python >= 3.12
        factory.type_params = []
    module = ast.Module(body=[factory], type_ignores=[])
    _locate(factory, function_ast.lineno)
    code = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                 and c.co_name == function_ast.name)
    inner = inner.replace(co_name=display_name)
    if hasattr(inner, "co_qualname"):
        inner = inner.replace(co_qualname=fn.__qualname__)
    _remember(inner)
    cells, itself = [], None
    for name in inner.co_freevars:
        if name == names.factory_def:  # a recursion: the function calls itself directly
            itself = types.CellType()
            cells.append(itself)
        elif name == names.ad:
            cells.append(types.CellType(ad))
        elif name in rules:
            cells.append(types.CellType(rules[name]))
        else:
            cells.append(fn.__closure__[user_freevars.index(name)])
    rev = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells) or None)
    rev.__kwdefaults__ = fn.__kwdefaults__
    rev.__qualname__ = fn.__qualname__
    rev.__doc__ = f"astad's transformed version of {fn.__qualname__}"
    rev._astad_origin = weakref.ref(fn)  # (what it may reach after a call: leftovers.py)
    if itself is not None:
        itself.cell_contents = rev
    return rev


def _locate(factory: ast.AST, lineno: int) -> None:
    """Give the factory's own nodes the function's line; keep the user's elsewhere."""
    for n in ast.walk(factory):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno = n.end_lineno = lineno
            n.col_offset = n.end_col_offset = 0
    ast.fix_missing_locations(factory)


def _remember(code: types.CodeType) -> None:
    GENERATED_CODE.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _remember(const)


# -- readable source ----------------------------------------------------------------
def render(function_ast: ast.FunctionDef, filename: str) -> str:
    """The generated function as text, with ``# original line`` before each statement."""
    display = copy.deepcopy(function_ast)
    seen: set = set()
    _add_comments(display, filename, seen)
    text = ast.unparse(display)
    lines = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.lstrip("'\"").startswith(_COMMENT_MARK):
            indent = line[: len(line) - len(line.lstrip())]
            comment = ast.literal_eval(stripped)[len(_COMMENT_MARK):]
            lines.append(f"{indent}# {comment}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _add_comments(node: ast.AST, filename: str, seen: set) -> None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
            continue
        new_block = []
        for stmt in block:
            lineno = getattr(stmt, "lineno", None)
            docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str)
            if lineno is not None and lineno not in seen and not docstring:
                seen.add(lineno)
                text = linecache.getline(filename, lineno).strip()
                compound = isinstance(stmt, ast.Match) or any(  # (cases are not statements)
                    isinstance(getattr(stmt, f, None), list) and getattr(stmt, f)
                    and isinstance(getattr(stmt, f)[0], ast.stmt)
                    for f in ("body", "orelse", "handlers"))
                if not compound and getattr(stmt, "end_lineno", lineno) != lineno:
                    text += " ..."
                if text:
                    marker = ast.Expr(ast.Constant(_COMMENT_MARK + text))
                    new_block.append(marker)
            _add_comments(stmt, filename, seen)
            new_block.append(stmt)
        setattr(node, field, new_block)
    for handler in getattr(node, "handlers", []):
        _add_comments(handler, filename, seen)
    for case in getattr(node, "cases", []):
        _add_comments(case, filename, seen)

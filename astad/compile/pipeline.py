"""The pipeline: from a Python function to the code astad runs, phase by phase.

    source     front/source.py         read the function's source, parse it (gast)
    fence      front/fence.py          refuse what cannot be differentiated, at its line
    normalize  front/normalize.py      ``t op= v`` and the like, rewritten
    activity   front/activity.py       which names can never hold a differentiated value
    specialise specialise/             the code for float arguments: value and gradient
                                       written out, forward mode written out
    transform  transform/reverse.py    the D rules of the paper, on the tree
    preaccumulate transform/preaccumulate.py  one tape entry per float expression
    compile    here                    the trees as Python functions, with the user's file
                                       and lines, the user's closure cells shared
    entry      compile/entry.py        one record of all of it, cached per function

``build`` is the story in code; ``compile/calls.py`` calls it (with how the callees of a
function are resolved) and caches what it gives.
"""
from __future__ import annotations

import ast
import copy
import linecache
import re
import types
import weakref

import gast

from ..front import fence
from ..front.activity import bound_names
from ..front.normalize import normalize
from ..front.source import parse_function
from ..registry import ad
from ..rules.scalar import rule_namespace
from ..specialise import specialise
from ..transform.bindings import distinct
from ..transform.reverse import Names, transform
from .entry import Entry, is_own_default, own_defaults, remember, with_cells
from .render import render


def build(fn, preaccumulate: bool = True, as_method: bool = False, callees=None) -> Entry:
    """Everything astad writes for the Python function ``fn``. ``callees(fn,
    preaccumulate, as_method, names)`` resolves the functions it calls by name when
    they are known now (compile/calls.py); without it every call goes through
    ``ad.rev``."""
    parsed, node, local_names, names = front(fn)                       # source .. normalize
    dependencies: list = []
    tapeless, forward = specialise(node, fn, local_names, parsed.filename,  # specialise
                                   dependencies, preaccumulate, as_method)
    resolve = callees(fn, preaccumulate, as_method, names) if callees is not None else None
    node, dependencies, rules, guards = transform(                       # transform,
        node, fn, local_names, names, preaccumulate, as_method, resolve, dependencies)
    # (a recursive call leaving defaults out: the specialised code holds them as constants)
    reads_defaults = any(is_own_default(binding, fn) for binding in dependencies)
    # ``taped`` copies the defaults now: a new __defaults__ tuple must rebuild it (and its
    # callers, which include these dependencies), as a call of ``fn`` would use it
    dependencies += own_defaults(fn)
    function_ast = gast.gast_to_ast(node)                                # compile
    ast.fix_missing_locations(function_ast)
    functions = {**compile_rules(rules, parsed.filename), **guards,     # (preaccumulated)
                 **(resolve.functions if resolve is not None else {})}
    taped, recipe = _compile(function_ast, fn, parsed.filename, names, functions)
    entry = Entry(fn, taped, distinct(dependencies),                     # entry
                  render(function_ast, parsed.filename) + _rules_text(rules, parsed.filename))
    entry.recipe, entry.reads_defaults = recipe, reads_defaults
    if resolve is not None:
        entry.helpers = tuple(resolve.helpers)
    recipes: dict = {}
    if tapeless is not None:
        function, text = tapeless
        entry.tapeless, recipes["tapeless"] = compile_as(function, fn, parsed.filename)
        entry.tapeless_tree = function
        said = re.match(r"\s*# every argument (.*?): ", text.split("\n")[1])
        kinds = said.group(1) if said else "a float"
        entry.specialised_source = (
            "# specialised for float arguments: value_and_grad and grad run this when "
            f"every argument is {kinds}\n" + text)
        entry.source += "\n\n" + entry.specialised_source
        entry.tapes = "gradient_of(" in text
    if forward is not None:  # forward mode on float arguments
        function, text, unchecked = forward
        entry.forward, recipes["forward"] = compile_as(function, fn, parsed.filename)
        entry.forward_tree = function
        entry.forward_source = text
        if unchecked is not None:
            entry.forward_unchecked, recipes["forward_unchecked"] = compile_as(
                unchecked, fn, parsed.filename)
    # (the code reading the user's closure, bound again for each function of this code)
    entry.cell_recipes = {role: made for role, made in recipes.items() if made is not None}
    return entry


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


def _rules_text(rules: list, filename: str) -> str:
    """The preaccumulated rules as ``.source`` shows them, after the function."""
    text = ""
    for _, rule in rules:
        line = linecache.getline(filename, rule.lineno).strip()
        text += (f"\n\n# line {rule.lineno}, preaccumulated: {line}\n"
                 f"# one tape entry with the partials of the whole expression\n"
                 + ast.unparse(rule) + "\n")
    return text


def compile_as(function: ast.FunctionDef, fn, filename: str, keep_name: bool = False):
    """A function written for ``fn`` (specialised code), compiled: a traceback through it
    names the user's function (unless ``keep_name``), as one through the taped code
    does; and, if it reads closure variables of ``fn`` by name (``astad_cells``), how it
    is bound to another function's cells (``(code, globals, positions in fn's
    closure)``, entry.with_cells), else None."""
    cells = getattr(function, "astad_cells", ())
    name = function.name if keep_name else fn.__name__
    if not cells:
        compiled = compile_rules([(function.name, function)], filename)[function.name]
        compiled.__code__ = compiled.__code__.replace(co_name=name)
        return compiled, None
    namespace = rule_namespace()
    namespace.update(function.astad_callees)
    inner = _closure_code(function, cells, filename).replace(co_name=name)
    remember(inner)
    free = fn.__code__.co_freevars
    recipe = (inner, namespace, tuple(free.index(name) for name in inner.co_freevars))
    return with_cells(recipe, fn), recipe


def compile_rules(rules: list, filename: str) -> dict:
    """Compile the fused rules (transform/preaccumulate.py) with astad's rule namespace
    as their globals (and the callees each was written for, which it checks)."""
    if not rules:
        return {}
    namespace = rule_namespace()
    for _, rule in rules:
        namespace.update(getattr(rule, "astad_callees", {}))
    module = ast.Module(body=[rule for _, rule in rules], type_ignores=[])
    valid_positions(module)
    code = compile(module, filename, "exec", dont_inherit=True)
    exec(code, namespace)  # astad's own templates; no user text
    compiled = {name: namespace[name] for name, _ in rules}
    for function in compiled.values():
        remember(function.__code__)
    return compiled


def _compile(function_ast: ast.FunctionDef, fn, filename: str, names: Names,
             rules: dict):
    user_freevars = list(fn.__code__.co_freevars)
    # Inside the factory the def gets a name of astad's own, so that a recursive call by
    # the user's name still reaches the global (or the user's closure cell), not this def.
    display_name = function_ast.name
    function_ast = copy.copy(function_ast)
    function_ast.name = names.factory_def
    inner = _closure_code(function_ast, [names.ad] + list(rules) + user_freevars,
                          filename).replace(co_name=display_name)
    if hasattr(inner, "co_qualname"):
        inner = inner.replace(co_qualname=fn.__qualname__)
    remember(inner)
    cells, itself, recipe = [], None, []
    for name in inner.co_freevars:
        if name == names.factory_def:  # a recursion: the function calls itself directly
            itself = types.CellType()
            cells.append(itself)
            recipe.append(("itself", None))
        elif name == names.ad or name in rules:
            cells.append(types.CellType(ad if name == names.ad else rules[name]))
            recipe.append(("cell", cells[-1]))
        else:
            k = user_freevars.index(name)
            cells.append(fn.__closure__[k])
            recipe.append(("user", k))
    rev = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells) or None)
    rev.__kwdefaults__ = fn.__kwdefaults__
    rev.__qualname__ = fn.__qualname__
    rev.__doc__ = f"astad's transformed version of {fn.__qualname__}"
    rev._astad_origin = weakref.ref(fn)  # (what it may reach after a call: core/escape.py)
    if itself is not None:
        itself.cell_contents = rev
    return rev, (inner, tuple(recipe))


def _closure_code(function: ast.FunctionDef, free: list, filename: str) -> types.CodeType:
    """The code of ``function`` compiled as a closure whose free variables are the names
    ``free`` (each read from a cell: the function built from it is given the cells)."""
    prelude = [ast.Assign(targets=[ast.Name(n, ast.Store())], value=ast.Constant(None))
               for n in free]  # (locals of a factory: free variables of the function)
    factory = ast.FunctionDef(
        name="_astad_factory", args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                                                  kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                  defaults=[]),
        body=prelude + [function, ast.Return(ast.Name(function.name, ast.Load()))],
        decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:  # Python >= 3.12
        factory.type_params = []
    module = ast.Module(body=[factory], type_ignores=[])
    _locate(factory, function.lineno)
    valid_positions(module)
    code = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    return next(c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                and c.co_name == function.name)


def _locate(factory: ast.AST, lineno: int) -> None:
    """Give the factory's own nodes the function's line; keep the user's elsewhere."""
    for n in ast.walk(factory):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno = n.end_lineno = lineno
            n.col_offset = n.end_col_offset = 0
    ast.fix_missing_locations(factory)
    valid_positions(factory)


def valid_positions(tree: ast.AST) -> None:
    """Make every node's source range one ``compile`` accepts. A generated node takes
    its start from one user node and its end from another (a preaccumulated expression
    spanning a formatter's layout: ``a + (\n    b * b\n)``), which may end before it
    starts; such a range becomes the start alone (tracebacks still name the line)."""
    for n in ast.walk(tree):
        start, end = getattr(n, "lineno", None), getattr(n, "end_lineno", None)
        if start is None or end is None:
            continue
        if end < start or end == start and n.end_col_offset is not None and \
                n.col_offset is not None and n.end_col_offset < n.col_offset:
            n.end_lineno, n.end_col_offset = start, n.col_offset

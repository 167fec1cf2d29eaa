"""The syntax allowlist every generated shape module passes before ``compile()`` (vm.md §9 S11).

The translator builds its source from integers and fixed templates only; this check makes that a
property of what is compiled rather than of how it was written. A module may hold only the ``ast`` node
types below, names of the translator's own alphabet (registers, cells, functions, helper slots and the
prebound names of ``translate.NAMESPACE``), calls only to prebound functions, guest functions and helper
slots, attribute access only to ``env.debt``, and integer constants only (yield operations are prebound
names, so the source holds no string at all). Anything else raises :class:`UnsafeSource` (the program then runs on the interpreter).
It runs once per shape-cache miss (``translate.translate``), never on the load path of a hit.
"""

from __future__ import annotations

import ast
import re

from wakeful.errors import WakefulError
from wakeful.vm.guest import SUSPENDING_HELPERS

__all__ = ["ALLOWED_NODES", "PREBOUND_CALLS", "PREBOUND_VALUES", "YIELD_NAMES", "UnsafeSource", "check_source"]


class UnsafeSource(WakefulError):
    """A generated module holds syntax outside the S11 allowlist (a translator bug, never run)."""


# vm.md §9 S11: the fixed allowlist of syntax nodes (statements, expressions, contexts, operators)
ALLOWED_NODES: frozenset[type[ast.AST]] = frozenset({
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg,
    ast.Assign, ast.AugAssign, ast.Expr, ast.Return, ast.While, ast.If, ast.Break, ast.Continue, ast.Pass,
    ast.Yield, ast.YieldFrom, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.NamedExpr, ast.Call,
    ast.Subscript, ast.Attribute, ast.Tuple, ast.Name, ast.Constant,
    ast.Load, ast.Store,
    ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift,
    ast.RShift, ast.USub, ast.Not,
    ast.Eq, ast.NotEq, ast.Gt, ast.GtE, ast.Lt, ast.LtE,
})

# the names translate.NAMESPACE binds before exec (a test keeps the two in step)
PREBOUND_CALLS = frozenset({"LDH", "LDW", "LDQ", "LDSB", "LDSH", "LDSW", "STH", "STW", "STQ",
                            "SDIV", "SMOD", "BSWAP32", "BSWAP64"})
# the yield operations: PREEMPT and one name per suspending helper, in helper-table order (vm.md §6.2)
YIELD_NAMES: tuple[str, ...] = ("PREEMPT", *(f"Y{i}" for i in range(len(SUSPENDING_HELPERS))))
PREBOUND_VALUES = frozenset({"BAD", *YIELD_NAMES})
# the translator's own locals and parameters
_FIXED_NAMES = frozenset({"shape", "instance", "M", "env", "H", "W", "L", "fp", "fuel", "i", "o", "_"})
# registers r0-r9, lifted cells kN, guest functions fN, sync helper slots hN
_NUMBERED = re.compile(r"(?:r[0-9]|[kfh](?:0|[1-9][0-9]*))")
_CALLABLE = re.compile(r"[fh](?:0|[1-9][0-9]*)")
_FUNCTION = re.compile(r"f(?:0|[1-9][0-9]*)")


def check_source(tree: ast.Module) -> None:
    """Raise :class:`UnsafeSource` unless every node of ``tree`` is on the allowlist (vm.md §9 S11)."""
    if not (len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == "shape"):
        raise UnsafeSource("a shape module holds exactly one definition, of shape()")
    # an explicit stack over every field (about twice as fast as ast.walk); a list element that is
    # not a node (a str in Global.names) is refused like any other type off the allowlist
    allowed, checks, node_type = ALLOWED_NODES, _CHECKS, ast.AST
    stack: list[ast.AST] = [tree]  # may briefly hold a non-node from a list field (refused below)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind not in allowed:
            raise UnsafeSource(f"line {getattr(node, 'lineno', 0)}: {kind.__name__} is not an allowed syntax node")
        check = checks.get(kind)
        if check is not None:
            check(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                stack.extend(value)
            elif isinstance(value, node_type):
                stack.append(value)


def _refuse(node: ast.AST, reason: str) -> None:
    raise UnsafeSource(f"line {getattr(node, 'lineno', 0)}: {reason}")


def _name(node: ast.AST) -> None:
    assert isinstance(node, ast.Name)
    ident = node.id
    if ident in _FIXED_NAMES or ident in PREBOUND_CALLS or ident in PREBOUND_VALUES or _NUMBERED.fullmatch(ident):
        return
    _refuse(node, f"name {ident!r} is outside the translator's alphabet")


def _constant(node: ast.AST) -> None:
    assert isinstance(node, ast.Constant)
    value = node.value
    if type(value) is int or value is True:
        return
    _refuse(node, f"constant of type {type(value).__name__} is not allowed")


def _call(node: ast.AST) -> None:
    assert isinstance(node, ast.Call)
    func = node.func
    if node.keywords or not isinstance(func, ast.Name):
        _refuse(node, "calls take positional arguments of a plain name")
    assert isinstance(func, ast.Name)
    if func.id not in PREBOUND_CALLS and not _CALLABLE.fullmatch(func.id):
        _refuse(node, f"call to {func.id!r}, which is not prebound")


def _attribute(node: ast.AST) -> None:
    assert isinstance(node, ast.Attribute)
    if not (isinstance(node.value, ast.Name) and node.value.id == "env" and node.attr == "debt"):
        _refuse(node, f"attribute {node.attr!r} is not env.debt")


def _subscript(node: ast.AST) -> None:
    assert isinstance(node, ast.Subscript)
    base = node.value
    if isinstance(base, ast.Name) and base.id in ("M", "H"):
        return
    if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in PREBOUND_CALLS:
        return
    _refuse(node, "only guest memory, helper slots and unpacked loads are subscripted")


def _function(node: ast.AST) -> None:
    assert isinstance(node, ast.FunctionDef)
    if node.decorator_list or node.returns is not None or node.type_comment is not None:
        _refuse(node, "functions carry no decorators or annotations")
    if node.name not in ("shape", "instance") and not _FUNCTION.fullmatch(node.name):
        _refuse(node, f"function name {node.name!r} is outside the translator's alphabet")


def _arguments(node: ast.AST) -> None:
    assert isinstance(node, ast.arguments)
    if node.posonlyargs or node.vararg or node.kwonlyargs or node.kw_defaults or node.kwarg or node.defaults:
        _refuse(node, "functions take plain positional parameters only")


def _arg(node: ast.AST) -> None:
    assert isinstance(node, ast.arg)
    if node.annotation is not None or node.type_comment is not None:
        _refuse(node, "parameters carry no annotations")
    if node.arg not in _FIXED_NAMES and not _NUMBERED.fullmatch(node.arg):
        _refuse(node, f"parameter {node.arg!r} is outside the translator's alphabet")


_CHECKS = {ast.Name: _name, ast.Constant: _constant, ast.Call: _call, ast.Attribute: _attribute,
           ast.Subscript: _subscript, ast.FunctionDef: _function, ast.arguments: _arguments, ast.arg: _arg}

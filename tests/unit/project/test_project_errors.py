"""The one error tree (issue 15): every exception wakeful raises derives from ``WakefulError`` (but the declared
control-flow ``SIGNALS``), each class name is unique, the tree in ``wakeful.errors``'s docstring draws every class
under its real parent with its real code, every code is a lowercase row of ``ERROR_CODES``, and upper-case names
exist only as the spinfoam v1 wire kinds of runtime-protocol.md §5.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import wakeful
from wakeful import errors
from wakeful.errors import ERROR_CODES, ROWS, SIGNALS, WIRE_RPC, WakefulError

SRC = Path(wakeful.__file__).resolve().parent
CODE = re.compile(r"[a-z][a-z0-9_]*")
WIRE = re.compile(r"[A-Z][A-Z0-9_]*")
# runtime-protocol.md §5, and the INTERNAL kind the server answers for a wakeful bug (-32603, JSON-RPC's own)
SPEC_5 = {
    "PARSE_ERROR": -32700, "INVALID_REQUEST": -32600, "DUPLICATE_ID": -32600, "METHOD_NOT_FOUND": -32601,
    "INVALID_PARAMS": -32602, "NOT_INITIALIZED": -32000, "BUSY": -32001, "MAILBOX_FULL": -32002,
    "RESPONSE_TOO_LARGE": -32003, "OBJECT_NOT_FOUND": -32004, "INVALID_OBJECT": -32010,
    "SANDBOX_UNAVAILABLE": -32020, "INTERNAL": -32603,
}


def _modules() -> list[object]:
    found = []
    for info in pkgutil.walk_packages(wakeful.__path__, "wakeful."):
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:  # an optional dependency (the bench's dbos peer): checked by _ast_only
            if (exc.name or "").split(".")[0] == "wakeful":
                raise
    return found


def exception_classes(modules: Iterable[object]) -> list[type[BaseException]]:
    """Every exception class defined at module level in ``modules``."""
    seen: dict[type[BaseException], None] = {}
    for module in modules:
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == getattr(module, "__name__", None)):
                seen[value] = None
    return list(seen)


CLASSES = exception_classes(_modules())


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def outside_the_tree(classes: Iterable[type[BaseException]]) -> list[str]:
    return [_qualified(c) for c in classes if not issubclass(c, WakefulError) and _qualified(c) not in SIGNALS]


def shared_names(classes: Iterable[type[BaseException]]) -> list[str]:
    by_name: dict[str, list[str]] = {}
    for cls in classes:
        by_name.setdefault(cls.__name__, []).append(_qualified(cls))
    return [f"{name}: {where}" for name, where in sorted(by_name.items()) if len(where) > 1]


def drawn_tree(doc: str) -> dict[str, tuple[str | None, str]]:
    """The docstring tree: class name -> (parent name, code column)."""
    drawn: dict[str, tuple[str | None, str]] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        match = re.match(r"^ {4}((?:[│ ] {3})*)(?:[├└]── )?([A-Za-z_]\w*)\s{2,}(\S+)", line)
        if match is None or (not match.group(1) and "──" not in line and match.group(2) != "WakefulError"):
            continue
        depth = len(match.group(1)) // 4 + (1 if "──" in line else 0)
        name = match.group(2)
        del stack[depth:]
        drawn[name] = (stack[-1] if stack else None, match.group(3))
        stack.append(name)
    return drawn


def _tree_parent(cls: type[WakefulError]) -> str | None:
    if cls is WakefulError:
        return None
    return next(b.__name__ for b in cls.__bases__ if issubclass(b, WakefulError))


def _sets_code_per_instance(cls: type) -> bool:
    """``__init__`` assigns ``self.code`` (a refusal whose code is its first argument)."""
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):  # a builtin __init__
        return False
    tree = ast.parse(inspect.cleandoc("\n" + source) if source.startswith(" ") else source)
    return any(isinstance(t, ast.Attribute) and t.attr == "code" and isinstance(t.value, ast.Name)
               and t.value.id == "self" for node in ast.walk(tree) if isinstance(node, ast.Assign)
               for t in node.targets)


def tree_mistakes(classes: Iterable[type[BaseException]], doc: str) -> list[str]:
    drawn = drawn_tree(doc)
    mistakes: list[str] = []
    names = set()
    for cls in classes:
        names.add(cls.__name__)
        if not issubclass(cls, WakefulError):
            continue
        if cls.__name__ not in drawn:
            mistakes.append(f"{_qualified(cls)} is not drawn in the tree of wakeful.errors")
            continue
        parent, code = drawn[cls.__name__]
        if parent != _tree_parent(cls):
            mistakes.append(f"{cls.__name__} is drawn under {parent}, but derives from {_tree_parent(cls)}")
        want = "[" if _sets_code_per_instance(cls) else cls.code
        if not code.startswith(want):
            mistakes.append(f"{cls.__name__} is drawn with code {code}, but its code is {want}")
    mistakes += [f"the tree draws {name}, which no module defines" for name in sorted(set(drawn) - names)]
    return mistakes


def _literal_codes() -> list[tuple[str, str, str]]:
    """(where, constructor, literal) for every ``Cls("literal", …)`` of a class that takes its code."""
    takers = {cls.__name__: list(inspect.signature(cls.__init__).parameters)[1]
              for cls in CLASSES if issubclass(cls, WakefulError) and _sets_code_per_instance(cls)}
    takers["HostCallError"] = "kind"  # a host-call reason (harness.md §9.4) or a host.call reply's wire kind
    takers["error_response"] = "code"  # api/errors.py: the HTTP face's body for a code
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            first = node.args[0]
            if name in takers and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((f"{path.relative_to(SRC)}:{node.lineno}", f"{name}({takers[name]})", first.value))
    return found


# ---------------------------------------------------------------- the tree


def test_every_exception_derives_from_wakeful_error() -> None:
    assert len(CLASSES) > 80
    assert outside_the_tree(CLASSES) == []


def test_signals_are_real_and_few() -> None:
    """A signal is a control-flow exception that must pass through ``except WakefulError``: not an error."""
    qualified = {_qualified(c): c for c in CLASSES}
    assert set(qualified) >= SIGNALS, SIGNALS - set(qualified)
    assert not any(issubclass(qualified[name], WakefulError) for name in SIGNALS)
    for name in SIGNALS:
        assert name.rsplit(".", 1)[1] in (errors.__doc__ or ""), f"the errors docstring names the signal {name}"


def test_classes_defined_where_imports_cannot_reach_derive_from_wakeful_error() -> None:
    """Nested classes and modules with a missing optional dependency: by the names of their bases."""
    tree_names = {c.__name__ for c in CLASSES if issubclass(c, WakefulError)}
    known = {_qualified(c) for c in CLASSES}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(("wakeful", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or f"{module}.{node.name}" in known:
                continue
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in
                     node.bases}
            looks_raised = any(re.search(r"(Exception|Error|Exit|Warning)$", b) for b in bases)
            assert not looks_raised or bases & tree_names, f"{path.relative_to(SRC)}:{node.lineno} {node.name}"


def test_each_exception_name_is_unique() -> None:
    assert shared_names(CLASSES) == []


def test_the_docstring_draws_the_whole_tree() -> None:
    assert tree_mistakes(CLASSES, errors.__doc__ or "") == []


def test_one_to_dict_shape() -> None:
    overriding = [_qualified(c) for c in CLASSES if issubclass(c, WakefulError)
                  and (c.to_dict is not WakefulError.to_dict or c.face_body is not WakefulError.face_body)]
    assert overriding == []
    refusal = errors.BundleError("path", "bad path", "a/../b.c")
    assert refusal.to_dict() == {"code": "invalid_bundle", "message": "bad path", "rule": "path", "path": "a/../b.c"}
    assert refusal.face_body() == {"error": "invalid_bundle", "message": "bad path", "rule": "path",
                                   "path": "a/../b.c"}


# ---------------------------------------------------------------- the table


def test_codes_are_lowercase_and_wire_kinds_uppercase() -> None:
    assert len(ERROR_CODES) == len(ROWS), "a code has two rows"
    assert [row.code for row in ROWS if not CODE.fullmatch(row.code)] == []
    assert [row.wire for row in ROWS if row.wire is not None and not WIRE.fullmatch(row.wire)] == []
    assert {row.mcp for row in ROWS} <= {"tool_error", "report", "internal"}
    assert all(row.http is None or 200 <= row.http <= 599 for row in ROWS)


def test_the_wire_kinds_are_those_of_protocol_v1() -> None:
    assert WIRE_RPC == SPEC_5
    for row in ROWS:  # one JSON-RPC code per wire kind, whichever row names it
        assert row.rpc is None or SPEC_5.get(row.wire or "") == row.rpc, row


def test_every_class_code_is_in_the_table() -> None:
    missing = [f"{_qualified(c)}: {c.code}" for c in CLASSES
               if issubclass(c, WakefulError) and c.code not in ERROR_CODES]
    assert missing == []


def test_every_literal_code_is_in_the_table() -> None:
    wire_kinds = {row.wire for row in ROWS if row.wire is not None}
    found = _literal_codes()
    assert len(found) > 100
    missing = [f"{where}: {call} {code!r}" for where, call, code in found
               if code not in ERROR_CODES and not (call.endswith("(kind)") and code in wire_kinds)]
    assert missing == []


def test_the_code_lists_of_each_area_are_rows_of_the_table() -> None:
    """The kernel's refusal codes (control-plane.md §4.1) and decide's outcomes (harness.md §16.5)."""
    from wakeful.control.errors import CODES as CONTROL
    from wakeful.harness.decide.errors import CODES as DECIDE

    assert sorted((CONTROL | DECIDE) - set(ERROR_CODES)) == []


# ---------------------------------------------------------------- the checks can fail


def test_the_checks_find_what_they_look_for() -> None:
    class Stray(ValueError):
        pass

    class InvalidParams(WakefulError):  # noqa: N818 - the name of a real class, on purpose
        code = "INVALID_PARAMS"

    assert outside_the_tree([Stray]) == [_qualified(Stray)]
    assert shared_names([errors.InvalidParams, InvalidParams]) != []
    assert "Stray" not in drawn_tree(errors.__doc__ or "")
    assert "InvalidParams is drawn with code invalid_request, but its code is INVALID_PARAMS" in tree_mistakes(
        [InvalidParams], errors.__doc__ or "")
    omitted = tree_mistakes([WakefulError, errors.InvalidParams], "    WakefulError   internal\n    └── Busy   busy\n")
    assert any("InvalidParams is not drawn" in m for m in omitted), omitted
    assert "the tree draws Busy, which no module defines" in omitted
    assert not CODE.fullmatch("INVALID_PARAMS")


@pytest.mark.parametrize("cls", [errors.InvalidParams, errors.Busy, errors.MailboxFull, errors.ObjectNotFound,
                                 errors.BuildUnavailable])
def test_runtime_errors_keep_their_wire_kind(cls: type[WakefulError]) -> None:
    """runtime-protocol.md §14: the in-process API's exceptions carry the code and kind of §5."""
    error = cls("x")
    assert error.wire_code in SPEC_5 and CODE.fullmatch(error.code)

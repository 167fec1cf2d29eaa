"""Name hints for agents (build.md §7, issue 18): undeclared names checked against the SDK's own names.

The names come from the SDK headers the build uses (declared functions, typedefs and macros with a value), never
from a copied list, so a header change changes the suggestions with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
# a declaration line: the first `name(` after `extern` / `SF_INLINE` / `static inline` is the function's name
FUNCTION = re.compile(r"^[ \t]*(?:extern|SF_INLINE|static[ \t]+inline)\b[^(;{}\n]*?\b([A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)
TYPEDEF = re.compile(r"\btypedef\b[^;{}]*?\b([A-Za-z_]\w*)[ \t]*;")
MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z]\w*)(?:\(|[ \t]+\S)", re.MULTILINE)
# clang's and the verifier's words for a name nothing declares or defines
UNDECLARED = re.compile(
    r"call to undeclared function '(?P<call>\w+)'|implicit declaration of function '(?P<implicit>\w+)'"
    r"|unknown helper '(?P<helper>\w+)'|use of undeclared identifier '(?P<ident>\w+)'"
    r"|unknown type name '(?P<type>\w+)'")
MAX_SUGGESTIONS = 3

# C library names an agent reaches for → the SDK names that do the job (names or name patterns, mentioned only
# when the header declares a match) and what to do when it declares none of them
LIBC: Mapping[str, tuple[tuple[str, ...], str]] = {
    "printf": (("sf_log",), "there is no printf; log text with sf_log"),
    "puts": (("sf_log",), "log text with sf_log"),
    "fprintf": (("sf_log",), "log text with sf_log"),
    "sprintf": (("wf_i64_to_dec", "wf_u64_to_dec"), "format numbers digit by digit into a char buffer"),
    "snprintf": (("wf_i64_to_dec", "wf_u64_to_dec"), "format numbers digit by digit into a char buffer"),
    "strcmp": (("wf_str_eq",), "compare the strings in a loop"),
    "strncmp": (("memcmp",), "compare the bytes in a loop"),
    "strcpy": (("memcpy",), "copy with memcpy and sf_strlen"),
    "strncpy": (("memcpy",), "copy with memcpy and sf_strlen"),
    "strcat": (("memcpy",), "copy with memcpy and sf_strlen"),
    "strchr": ((r"\w*(?:find|search|contains)\w*",), "search the string in a loop"),
    "strlen": (("sf_strlen",), "count the bytes before the NUL in a loop"),
    "strstr": ((r"\w*(?:find|search|contains)\w*",), "search the string in a loop"),
    "atoi": (("sf_json_i64",), "parse the digits in a loop"),
    "strtol": (("sf_json_i64",), "parse the digits in a loop"),
    "malloc": ((), "there is no heap: use static arrays (static globals for big buffers)"),
    "calloc": ((), "there is no heap: use static arrays (static globals for big buffers)"),
    "realloc": ((), "there is no heap: use static arrays (static globals for big buffers)"),
    "free": ((), "there is no heap: use static arrays (static globals for big buffers)"),
    "sleep": (("sf_sleep_ms",), "wait with sf_sleep_ms"),
    "usleep": (("sf_sleep_ms",), "wait with sf_sleep_ms"),
    "time": (("sf_now_unix_ms",), "read the clock with sf_now_unix_ms"),
    "exit": ((), "return from main to end the program"),
    "abort": ((), "return a negative status from main"),
    "assert": ((), "check the condition and return a negative status"),
}


def sdk_names(headers: Mapping[str, bytes]) -> frozenset[str]:
    """Every function, typedef and valued macro the SDK headers declare (public names only, no ``_x``)."""
    found: set[str] = set()
    for data in headers.values():
        text = COMMENT.sub(" ", data.decode("utf-8", "replace"))
        for pattern in (FUNCTION, TYPEDEF, MACRO):
            found.update(m.group(1) for m in pattern.finditer(text))
    return frozenset(name for name in found if not name.startswith("_"))


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (insert, delete, substitute, swap two neighbours)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def suggest(name: str, names: Iterable[str]) -> list[str]:
    """The closest SDK names to ``name`` (at most 3, nearest first), or none when nothing is close."""
    limit = 1 if len(name) <= 4 else 2 if len(name) <= 8 else 3
    scored = sorted((edit_distance(name.lower(), cand.lower()), cand) for cand in names if cand != name)
    near = [(dist, cand) for dist, cand in scored if dist <= limit]
    if not near:
        return []
    best = near[0][0]
    return [cand for dist, cand in near if dist == best][:MAX_SUGGESTIONS]


def name_hints(text: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(position, hint) for each distinct undeclared name in ``text``, checked against the SDK's names."""
    hints: list[tuple[int, str]] = []
    seen: set[str] = set()
    for m in UNDECLARED.finditer(text):
        kind = m.lastgroup or ""
        name = m.group(kind)
        if name in seen:
            continue
        seen.add(name)
        hint = _hint(name, kind, names)
        if hint:
            hints.append((m.start(), hint))
    return hints


def _hint(name: str, kind: str, names: frozenset[str]) -> str:
    if name in names:
        return f"{name} is declared by the SDK header: add #include <wakeful.h> at the top of the file"
    if name in LIBC:
        return _libc_hint(name, names)
    close = suggest(name, names)
    if close:
        return f"{name} is not an SDK name; did you mean {' or '.join(close)}? (names from wakeful.h)"
    if kind in ("call", "implicit"):
        return (f"{name} is not declared: define or declare it above its first use (there is no C library; the "
                "SDK is wakeful.h)")
    return ""


def _libc_hint(name: str, names: frozenset[str]) -> str:
    candidates, fallback = LIBC[name]
    have: list[str] = []
    for pattern in candidates:
        have += sorted(cand for cand in names if re.fullmatch(pattern, cand) and cand not in have)
    have += sorted(cand for cand in names if cand.endswith("_" + name) and cand not in have)
    if have:
        return f"{name} is from the C library, which wakeful does not have; use {' or '.join(have)}"
    return f"{name} is from the C library, which wakeful does not have, and the SDK has no equivalent; {fallback}"

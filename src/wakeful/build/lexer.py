"""A lexer for gnu17 preprocessing tokens as clang lexes them with the flags of build.md §2.1 (§4.1).

Used on bundle sources before any compiler runs and on clang's ``-E`` output (§4.3); streams tokens.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

# build.md §4.1: a line splice is a backslash, optional spaces or tabs, and LF
SPLICE = re.compile(r"\\[ \t]*\n")

# build.md §4.1: whitespace, comments, literals with prefixes, pp-numbers, identifiers, punctuators
# (digraphs included). Raw strings are off (-fno-raw-string-literals), trigraphs are off in gnu17;
# u8 is a string prefix only (u8 character literals are C23). An unterminated literal ends at the line end.
TOKEN = re.compile(
    r"""
     (?P<nl>\n)
    |(?P<ws>[ \t\v\f]+)
    |(?P<bcom>/\*.*?(?:\*/|\Z))
    |(?P<lcom>//[^\n]*)
    |(?P<string>(?:u8|[LuU])?"(?:[^"\\\n]|\\(?:[^\n]|\Z))*(?:"|(?=\n)|\Z))
    |(?P<char>[LuU]?'(?:[^'\\\n]|\\(?:[^\n]|\Z))*(?:'|(?=\n)|\Z))
    |(?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.$])*)
    |(?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
    |(?P<punct>%:%:|\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\*=|/=|%=|\+=|-=|&=|\^=|\|=
              |\#\#|<:|:>|<%|%>|%:|[][(){}.&*+\-~!/%<>^|?:;=,\#])
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
HEADER_NAME = re.compile(r"<[^>\n]*>")
RAW_PREFIXES = frozenset({"R", "LR", "uR", "UR", "u8R"})
HASH = frozenset({"#", "%:"})
PASTE = frozenset({"##", "%:%:"})


class Token:
    """One preprocessing token. ``text`` has splices removed; ``start`` is an offset in the logical text;
    ``gap`` is the logical text between the previous token of the same line (or the line start) and it."""

    __slots__ = ("kind", "text", "start", "bol", "gap")

    def __init__(self, kind: str, text: str, start: int, bol: bool, gap: str) -> None:
        self.kind = kind
        self.text = text
        self.start = start
        self.bol = bol
        self.gap = gap

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.start})"


@dataclass(frozen=True, slots=True)
class LexFinding:
    """A lexical refusal: raw string, UCN or non-ASCII outside comments and literals."""

    start: int
    message: str


class Source:
    """A file's text after splice removal, with the map back to original line and byte column."""

    def __init__(self, text: str) -> None:
        self.original = text
        self._newlines = [m.start() for m in re.finditer("\n", text)]
        self._splice_at: list[int] = []
        self._removed: list[int] = [0]
        pieces: list[str] = []
        last = 0
        for m in SPLICE.finditer(text):
            pieces.append(text[last : m.start()])
            self._splice_at.append(m.start() - self._removed[-1])
            self._removed.append(self._removed[-1] + (m.end() - m.start()))
            last = m.end()
        pieces.append(text[last:])
        self.text = "".join(pieces)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, byte column) in the original text of a logical offset."""
        k = bisect.bisect_right(self._splice_at, offset)
        orig = offset + self._removed[k]
        line = bisect.bisect_left(self._newlines, orig)
        line_start = self._newlines[line - 1] + 1 if line else 0
        col = len(self.original[line_start:orig].encode("utf-8", "surrogatepass")) + 1
        return line + 1, col


def tokens(text: str, findings: list[LexFinding] | None = None) -> Iterator[Token]:
    """Yield the tokens of logical ``text`` (splices removed), with ``nl`` tokens ending each logical line.

    A newline inside a block comment neither ends the line nor starts a new one (clang agrees).
    Findings (raw strings, UCNs, non-ASCII) are appended to ``findings`` when given.
    """
    bol = True
    gap_start = 0
    for m in TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        if kind in ("ws", "bcom", "lcom"):
            continue
        start = m.start()
        tok = Token(kind, m.group(), start, bol, text[gap_start:start])
        gap_start = m.end()
        if kind == "nl":
            bol = True
        else:
            bol = False
            if findings is not None:
                _lexical_findings(tok, text, m.end(), findings)
        yield tok


def lines(text: str, findings: list[LexFinding] | None = None) -> Iterator[list[Token]]:
    """Group ``tokens(text)`` into logical lines (the ``nl`` tokens are dropped; empty lines skipped)."""
    line: list[Token] = []
    for tok in tokens(text, findings):
        if tok.kind == "nl":
            if line:
                yield line
                line = []
        else:
            line.append(tok)
    if line:
        yield line


def header_name(text: str, lt: Token) -> str | None:
    """The ``<...>`` header name starting at token ``lt`` (a ``<`` after ``#include``), or None."""
    m = HEADER_NAME.match(text, lt.start)
    return m.group() if m else None


# build.md §4.1: raw-string prefixes refused, UCNs and non-ASCII outside comments and literals refused
def _lexical_findings(tok: Token, text: str, end: int, findings: list[LexFinding]) -> None:
    if tok.kind == "ident" and tok.text in RAW_PREFIXES and text.startswith('"', end):
        findings.append(LexFinding(tok.start, "raw string literal"))
    elif tok.kind == "other":
        if tok.text == "\\" and text.startswith(("u", "U"), end):
            findings.append(LexFinding(tok.start, "universal character name in identifier"))
        elif ord(tok.text) > 127:
            findings.append(LexFinding(tok.start, "non-ASCII character outside a comment or literal"))

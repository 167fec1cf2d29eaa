"""Confinement layer 1 (build.md §4): the source scan, include resolution, and the preprocessed-text check
that writes the compiler's only input, ``out/main.i``, from the tokens it accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from wakeful.build.bundle import PATH_CHARS, Bundle
from wakeful.build.lexer import HASH, PASTE, LexFinding, Source, Token, header_name, lines, tokens

# build.md §4.1 "Identifiers": forbidden names; any identifier starting with one, or a proper prefix of one
FORBIDDEN_NAMES = ("__has_include", "__has_include_next", "__has_embed", "_Pragma", "__pragma")
# build.md §4.3: inline assembly keywords refused in the preprocessed text
ASM_KEYWORDS = frozenset({"asm", "__asm", "__asm__"})
# build.md §4.1 "Directives": allowed without file access
PLAIN_DIRECTIVES = frozenset(
    {"define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif",
     "line", "error", "warning"}
)
# build.md §4.1 "#pragma" allowlist
PRAGMAS_ONE = frozenset({"once", "pack", "unroll", "nounroll", "STDC", "message", "push_macro", "pop_macro"})
PRAGMAS_TWO = frozenset(
    {("clang", "loop"), ("GCC", "unroll"), ("GCC", "diagnostic"), ("clang", "diagnostic"),
     ("GCC", "poison"), ("GCC", "system_header")}
)
PRAGMA_NAMESPACES = frozenset({"GCC", "clang", "STDC", "omp"})
MAX_FINDINGS = 20
MAX_DIRECTIVE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class Finding:
    """A scan refusal at ``path:line:col``, formatted like a clang error (build.md §7)."""

    path: str
    line: int
    col: int
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: error: {self.message}"


@dataclass(slots=True)
class FileScan:
    """What the scan saw in one file: findings, plus macros, includes and identifiers (row 27)."""

    findings: list[Finding] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)


def is_forbidden(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """build.md §4.1: forbidden names, names beginning with one, and their proper prefixes."""
    if name in extra:
        return True
    return any(name.startswith(f) or f.startswith(name) for f in FORBIDDEN_NAMES)


def forbidden_predefined(macros: dict[str, str]) -> frozenset[str]:
    """Predefined macros whose expansion contains a forbidden identifier, transitively (build.md §4.1)."""
    bad: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in macros.items():
            if name in bad:
                continue
            idents = (t.text for t in tokens(body) if t.kind == "ident")
            if any(is_forbidden(i, frozenset(bad)) for i in idents):
                bad.add(name)
                changed = True
    return frozenset(bad)


# --------------------------------------------------------------------------- source scan (§4.1, §4.2)


def scan_bundle(
    bundle: Bundle, sdk_headers: Iterable[str], forbidden: frozenset[str] = frozenset()
) -> list[Finding]:
    """Scan every bundle file; return the findings (at most ``MAX_FINDINGS``)."""
    sdk = frozenset(sdk_headers)
    findings: list[Finding] = []
    for path in sorted(bundle.files):
        findings.extend(scan_file(path, bundle.files[path], bundle, sdk, forbidden).findings)
    return findings[:MAX_FINDINGS]


def scan_file(
    path: str, text: str, bundle: Bundle, sdk: frozenset[str], forbidden: frozenset[str] = frozenset()
) -> FileScan:
    """Scan one normalised file of ``bundle`` (build.md §4.1)."""
    src = Source(text)
    result = FileScan()
    lexed: list[LexFinding] = []
    for line in lines(src.text, lexed):
        if line[0].kind == "punct" and line[0].text in HASH:
            _directive(line, path, src, bundle, sdk, forbidden, result)
        else:
            _plain_line(line, path, src, forbidden, result)
    for lf in lexed:
        result.findings.append(_at(path, src, lf.start, lf.message))
    result.findings.sort(key=lambda f: (f.line, f.col))
    return result


def _plain_line(line: list[Token], path: str, src: Source, forbidden: frozenset[str], out: FileScan) -> None:
    for tok in line:
        if tok.kind == "ident":
            out.identifiers.append(tok.text)
            _check_ident(tok, path, src, forbidden, out)


def _check_ident(tok: Token, path: str, src: Source, forbidden: frozenset[str], out: FileScan) -> None:
    if is_forbidden(tok.text, forbidden):
        out.findings.append(_at(path, src, tok.start, f"forbidden identifier '{tok.text}'"))


# build.md §4.1 "Directives" table, judged in every conditional branch
def _directive(
    line: list[Token], path: str, src: Source, bundle: Bundle, sdk: frozenset[str],
    forbidden: frozenset[str], out: FileScan,
) -> None:
    checked = line
    if len(line) == 1 or line[1].kind == "number":
        pass  # the null directive, or a GNU line marker
    elif line[1].kind != "ident":
        out.findings.append(_at(path, src, line[1].start, "directive not allowed"))
    elif line[1].text == "include":
        checked = _include(line, path, src, bundle, sdk, out)
    elif line[1].text == "pragma":
        _pragma(line, path, src, out)
    elif line[1].text not in PLAIN_DIRECTIVES:
        out.findings.append(_at(path, src, line[1].start, f"directive not allowed: #{line[1].text}"))
    elif line[1].text == "define" and len(line) > 2 and line[2].kind == "ident":
        out.defines.append(line[2].text)
    for tok in checked:
        if tok.kind == "ident":
            _check_ident(tok, path, src, forbidden, out)


# build.md §4.1 `#include`: exactly one header-name token, then nothing; §4.2 resolution
def _include(
    line: list[Token], path: str, src: Source, bundle: Bundle, sdk: frozenset[str], out: FileScan
) -> list[Token]:
    operand = _header_operand(line, src)
    if operand is None:
        out.findings.append(_at(path, src, line[1].start, "computed include (a macro or other operand)"))
        return line
    target, quoted = operand
    where = line[2].start
    problem = _include_path_problem(target)
    if problem is None:
        includer_dir = path.rsplit("/", 1)[0] if "/" in path else ""
        resolved, problem = resolve_include(target, quoted, includer_dir, bundle, sdk)
        if resolved is not None:
            out.includes.append(resolved)
    if problem is not None:
        out.findings.append(_at(path, src, where, problem))
    return line[:2]


def _header_operand(line: list[Token], src: Source) -> tuple[str, bool] | None:
    if len(line) < 3:
        return None
    tok = line[2]
    if tok.kind == "string" and tok.text.startswith('"'):
        ok = len(tok.text) >= 2 and tok.text.endswith('"') and len(line) == 3
        return (tok.text[1:-1], True) if ok else None
    if tok.kind == "punct" and tok.text == "<":
        name = header_name(src.text, tok)
        if name is None:
            return None
        end = tok.start + len(name)
        return (name[1:-1], False) if all(t.start >= tok.start for t in line[2:]) and all(
            t.start < end for t in line[2:]
        ) else None
    return None


def _include_path_problem(target: str) -> str | None:
    if not target:
        return "empty include path"
    if target.startswith("/"):
        return "absolute include path"
    if not PATH_CHARS.match(target):
        return "include path may use only A-Z a-z 0-9 _ . / -"
    return None


def resolve_include(
    target: str, quoted: bool, includer_dir: str, bundle: Bundle, sdk: frozenset[str]
) -> tuple[str | None, str | None]:
    """build.md §4.2: clang's order; returns (``src/<p>`` or ``sdk/<p>`` found, or None; problem or None)."""
    base = includer_dir.split("/") if includer_dir else []
    candidates = ([("src", base)] if quoted else []) + [("src", []), ("sdk", [])]
    for root, start in candidates:
        dirs = bundle.directories() if root == "src" else frozenset({""})
        files = frozenset(bundle.files) if root == "src" else sdk
        escapes, found = _walk(start, target, dirs, files)
        if escapes:
            return None, "include path escapes the bundle"
        if found is not None:
            return f"{root}/{found}", None
    return None, None


def _walk(start: list[str], target: str, dirs: frozenset[str], files: frozenset[str]) -> tuple[bool, str | None]:
    stack = list(start)
    exists = True
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return True, None
            exists = exists and "/".join(stack) in dirs
            stack.pop()
        else:
            stack.append(part)
    name = "/".join(stack)
    return False, (name if exists and name in files else None)


# build.md §4.1 `#pragma` allowlist, refused by name
def _pragma(line: list[Token], path: str, src: Source, out: FileScan) -> None:
    if len(line) < 3:
        return
    if not pragma_allowed(line[2:]):
        out.findings.append(_at(path, src, line[2].start, f"pragma not allowed: #pragma {_pragma_name(line[2:])}"))


def pragma_allowed(words: list[Token]) -> bool:
    """True if the tokens after ``#pragma`` start an allowed pragma (build.md §4.1)."""
    first = words[0].text
    if words[0].kind == "ident" and first in PRAGMAS_ONE:
        return True
    return len(words) > 1 and (first, words[1].text) in PRAGMAS_TWO


def _pragma_name(words: list[Token]) -> str:
    if words[0].text in PRAGMA_NAMESPACES and len(words) > 1:
        return f"{words[0].text} {words[1].text}"
    return words[0].text


def _at(path: str, src: Source, offset: int, message: str) -> Finding:
    line, col = src.position(offset)
    return Finding(path, line, col, message)


# --------------------------------------------------------------------------- preprocessed text (§4.3)


class PreprocessedCheck:
    """Lex clang's ``-E`` output and rebuild the compiler's input from the accepted tokens (build.md §4.3).

    Positions in findings are presumed ones (from the line markers), as clang would show them.
    """

    def __init__(self, text: str, forbidden: frozenset[str] = frozenset()) -> None:
        self.src = Source(text)
        self.forbidden = forbidden
        self.findings: list[Finding] = []
        self._out: list[str] = []
        self._emitted_lines = 1
        self._marker: tuple[str, int, int] = ("<stdin>", 1, 0)  # presumed file, line, physical line

    def run(self) -> str:
        """Check everything; return ``out/main.i``'s text (only meaningful when no findings)."""
        lexed: list[LexFinding] = []
        directive: list[Token] | None = None
        for tok in tokens(self.src.text, lexed):
            if tok.kind == "nl":
                if directive is not None:
                    self._directive_line(directive)
                    directive = None
                self._newline(tok)
            elif tok.bol and tok.kind == "punct" and tok.text in HASH:
                directive = [tok]
            elif directive is not None:
                if len(directive) < MAX_DIRECTIVE_TOKENS:
                    directive.append(tok)
            else:
                self._check_token(tok)
                self._emit(tok)
            if len(self.findings) >= MAX_FINDINGS:
                break
        if directive is not None:
            self._directive_line(directive)
        for lf in lexed[: MAX_FINDINGS - len(self.findings)]:
            self._finding(lf.start, lf.message)
        self.findings = self.findings[:MAX_FINDINGS]
        return "".join(self._out)

    # build.md §4.3: every token is judged: directive tokens, pastes, forbidden identifiers, asm, stray bytes
    def _check_token(self, tok: Token) -> None:
        if tok.kind == "punct" and (tok.text in HASH or tok.text in PASTE):
            self._finding(tok.start, f"preprocessed text contains a directive token '{tok.text}'")
        elif tok.kind == "ident" and tok.text in ASM_KEYWORDS:
            self._finding(tok.start, f"inline assembly ('{tok.text}') is not allowed")
        elif tok.kind == "ident" and is_forbidden(tok.text, self.forbidden):
            self._finding(tok.start, f"forbidden identifier '{tok.text}'")
        elif tok.kind == "other" and ord(tok.text) < 128:
            self._finding(tok.start, f"stray character {tok.text!r} in preprocessed text")

    # build.md §4.3: only well-formed line markers and allowed pragma lines may start with '#'
    def _directive_line(self, line: list[Token]) -> None:
        marker = _line_marker(line)
        if marker is not None:
            line_no = self.src.position(line[0].start)[0]
            self._marker = (marker[0], marker[1], line_no)
        elif len(line) > 2 and line[1].text == "pragma" and pragma_allowed(line[2:]):
            for tok in line[2:]:
                self._check_token(tok)
        else:
            self._finding(line[0].start, f"preprocessed text contains a directive token '{line[0].text}'")
            return
        for tok in line:
            self._emit(tok, in_directive=True)

    def _emit(self, tok: Token, *, in_directive: bool = False) -> None:
        gap = tok.gap
        if tok.bol:
            gap = gap.rsplit("\n", 1)[-1]
        if gap.strip(" \t") or "\n" in gap:
            gap = " "
        self._out.append(gap + tok.text)

    def _newline(self, tok: Token) -> None:
        target = self.src.position(tok.start)[0] + 1
        count = max(1, target - self._emitted_lines)
        self._out.append("\n" * count)
        self._emitted_lines += count

    def _finding(self, offset: int, message: str) -> None:
        line, col = self.src.position(offset)
        name, presumed, physical = self._marker
        self.findings.append(Finding(name, presumed + (line - physical - 1), col, message))


def _line_marker(line: list[Token]) -> tuple[str, int] | None:
    """``# <digits> "<name>"`` followed only by flags 1 to 4, alone on its line (build.md §4.3)."""
    if len(line) < 3 or line[0].text != "#" or line[1].kind != "number" or not line[1].text.isdigit():
        return None
    name = line[2].text
    if line[2].kind != "string" or not name.startswith('"') or len(name) < 2 or not name.endswith('"'):
        return None
    if any(t.text not in ("1", "2", "3", "4") for t in line[3:]):
        return None
    return name[1:-1], int(line[1].text)


def check_preprocessed(text: str, forbidden: frozenset[str] = frozenset()) -> tuple[str, list[Finding]]:
    """Run the §4.3 check; return (``main.i`` text, findings)."""
    check = PreprocessedCheck(text, forbidden)
    main_i = check.run()
    return main_i, check.findings

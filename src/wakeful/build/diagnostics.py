"""Diagnostics for agents (build.md §7): clean compiler output, rewrite paths, cut to size, explain failures.

Pure text functions; the driver feeds them the captured stderr of both compiler steps and its own findings.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from wakeful.build.hints import name_hints

MAX_DIAGNOSTIC_BYTES = 16_384
MAX_EXPLANATIONS = 8

# build.md §7: a backend crash report runs from one of these markers to the end
CRASH_MARKERS = re.compile(r"^.*(?:PLEASE submit a bug report|Stack dump:)", re.MULTILINE)
HEX_ADDRESS = re.compile(r"0x[0-9a-f]{6,}")
SDK_PATH = re.compile(r"(?<![\w/.<>-])sdk/([\w.+-]+(?:/[\w.+-]+)*)")
SRC_PATH = re.compile(r"(?<![\w/.<>-])src/(?=[\w.+-])")
HOST_PATH = re.compile(r"(?<![\w/.<>-])/(?:[\w.+-]+/)+([\w.+-]+)")
SUMMARY_LINE = re.compile(r"^\d+ (?:errors?|warnings?)(?: and \d+ errors?)? generated\.\n?\Z", re.MULTILINE)
# clang's message header, quoted source line (`  12 | text`) and caret or fix-it line (`     | ^~~`)
HEADER = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+)(?P<rest>: (?:fatal error|error|warning|note|remark): .*)$")
SNIPPET = re.compile(r"^(?P<pad> *)(?P<num>\d+) \| (?P<text>.*)$")
GUTTER = re.compile(r"^(?P<pad> *)\|(?: (?P<text>.*))?$")
UNPRINTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
MESSAGE_START = re.compile(r"^(?:\S[^\n]*?: )?(?:fatal error|error|warning|note|remark): ", re.MULTILINE)

# issue 18: advice from clang or the VM that contradicts the dialect — the stack size is fixed (no per-cpu maps,
# no -mllvm flags in a request) and the build already passes -fno-jump-tables; the wakeful: line says what to do
CONTRADICTING = re.compile(
    r"(?<=stack limit is exceeded\.) Please move large on stack variables into BPF per-cpu array map\.[^\n]*(?:\n(?=\n))?"
    r"|; rebuild with -fno-jump-tables")

# build.md §7 explanation table (and issue 18: every dialect violation that reaches clang or the verifier):
# (pattern in the text, one plain-words line)
EXPLANATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"ELF_ENTRY: need exactly one non-empty code section named spinfoam\.main"),
     "there is no entry point: #include <wakeful.h> and mark the entry function SF_MAIN, as in "
     "SF_MAIN sf_i64 main(void) { ... }"),
    (re.compile(r"ELF_ENTRY: spinfoam\.main must hold exactly one function"),
     "only one function may be marked SF_MAIN; make the others plain static functions"),
    (re.compile(r"built-in function '?__\w+[sdt]f\d?'?|__\w+(?:sf|df|tf)\d?\b.*not supported|call to __\w+(?:sf|df|tf)\d?\b"),
     "floating point is not available; use integers, e.g. fixed point in thousandths"),
    (re.compile(r"built-in function '__\w+ti3'|only small returns supported"),
     "no 128-bit arithmetic and no return values over 64 bits; use sf_i64/sf_u64 and return bigger values "
     "through a pointer argument"),
    (re.compile(r"(?:built-in|builtin) (?:function )?'?(?:memcpy|memset|memmove)'? .*not supported|"
                r"call to built-in function '(?:memcpy|memset|memmove)' is not supported"),
     "variable-size copies must call the SDK's memcpy/memset/memmove explicitly"),
    (re.compile(r"[Uu]nsupported signed division"),
     "signed / and % need ISA v4 (wakeful's default); only seen with other settings"),
    (re.compile(r"stack limit is exceeded|[Ll]ooks like the BPF stack limit|\bSTACK: .*frame of"),
     "a function may use about 4,000 bytes of locals (its frame is 4,096 bytes including the compiler's own "
     "slots); move big buffers to static globals"),
    (re.compile(r"too many arguments|stack arguments are not supported"),
     "functions take at most 5 arguments; pass a pointer to a struct"),
    (re.compile(r"aggregate returns are not supported|pass by value not supported|aggregate.*not supported"),
     "pass and return structs by pointer"),
    (re.compile(r"variadic functions are not supported"),
     "no variadic functions (...); clang's backend may then crash (compiler_crashed)"),
    (re.compile(r"\[wakeful:compiler_crashed\]"),
     "the compiler crashed on this input, usually because of a variadic function; simplify the code near the "
     "reported line"),
    (re.compile(r"dynamic stack allocation|[Uu]nsupported dynamic stack"),
     "no variable-length arrays or alloca"),
    (re.compile(r"thread-local storage is not supported"),
     "there is no thread-local storage (_Thread_local, __thread); a Loop is one thread, use a static global"),
    (re.compile(r"'(?:stdio|stdlib|string|math|unistd|stdarg|limits|ctype|time|errno|assert|inttypes|stdio_ext|"
                r"signal|fcntl|strings|float|setjmp|locale|wchar|threads|pthread|sys/\w+)\.h' file not found"),
     "there is no C library; include wakeful.h; use sf_log, sf_strlen, wf_* helpers"),
    (re.compile(r"\bRECURSION\b"), "recursion is not allowed; use a loop with an explicit stack array"),
    (re.compile(r"\bCALL_DEPTH\b"),
     "call chains are limited to 8 functions including main; inline helpers with SF_INLINE"),
    (re.compile(r"\bUNKNOWN_HELPER\b"),
     "only SDK helpers may be called without a definition; check the name or define the function"),
    (re.compile(r"function pointer|\bcallx\b|\bCALLX\b|indirect call"),
     "function pointers are not supported; use a switch"),
    (re.compile(r"\bJUMP_TABLE\b"),
     "computed goto (goto *p, &&label) is not supported; use a switch"),
    (re.compile(r"undefined data symbol"),
     "extern variables are not supported: define the variable in the bundle"),
    (re.compile(r"\bINSN_COUNT\b"),
     "the program has too many instructions; shrink unrolled loops and large SF_INLINE helpers"),
    (re.compile(r"inline assembly"), "inline asm is not part of the dialect"),
    (re.compile(r"exceeds 64 KiB|ELF_IMAGE|ELF_SIZE"), "shrink tables, strings or unrolled code"),
    (re.compile(r"\[wakeful:scan\]"), "each message already states the rule"),
)


def clean(text: str, staging: str) -> str:
    """Crash report removed, paths rewritten, addresses folded, repeated messages collapsed (§7)."""
    text = remove_crash_report(text)
    text = rewrite_paths(text, staging)
    text = HEX_ADDRESS.sub("0x…", text)
    return collapse_duplicates(CONTRADICTING.sub("", text))


def remove_crash_report(text: str) -> str:
    """Drop everything from ``PLEASE submit a bug report`` or ``Stack dump:`` to the end."""
    m = CRASH_MARKERS.search(text)
    return text[: m.start()] if m else text


def rewrite_paths(text: str, staging: str) -> str:
    """Staging paths → bundle-relative names; SDK → ``<sdk>/name``; other absolute paths → ``<host>/base``."""
    if staging:
        text = text.replace(staging.rstrip("/") + "/", "")
    text = SDK_PATH.sub(lambda m: f"<sdk>/{m.group(1)}", text)
    text = SRC_PATH.sub("", text)
    return HOST_PATH.sub(lambda m: f"<host>/{m.group(1)}", text)


def collapse_duplicates(text: str) -> str:
    """Keep each message (by its first line) once: clang repeats the stack-limit error, and prints a whole
    block of backend errors twice (once per codegen pass), so repeats need not be consecutive (§7)."""
    summary = SUMMARY_LINE.search(text)  # "N errors generated." stays even when its block is a repeat
    tail = summary.group(0) if summary else ""
    if summary:
        text = text[: summary.start()] + text[summary.end() :]
    starts = [m.start() for m in MESSAGE_START.finditer(text)]
    if not starts:
        return text + tail
    blocks = [text[: starts[0]]] + [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    kept = [blocks[0]]
    seen: set[str] = set()
    for block in blocks[1:]:
        header = block.split("\n", 1)[0]
        if header not in seen:
            kept.append(block)
        seen.add(header)
    return "".join(kept) + tail


def cut(text: str, limit: int = MAX_DIAGNOSTIC_BYTES) -> tuple[str, bool]:
    """Cut to ``limit`` UTF-8 bytes at a line boundary; returns (text, truncated)."""
    data = text.encode()
    if len(data) <= limit:
        return text, False
    head = data[:limit]
    nl = head.rfind(b"\n")
    head = head[: nl + 1] if nl >= 0 else b""
    return head.decode("utf-8", "ignore"), True


def explanations(text: str, names: frozenset[str] = frozenset()) -> list[str]:
    """The ``wakeful: …`` lines for known failures found in ``text``, in the order they first occur (each at most
    once, at most 8); ``names`` (the SDK's declared names) turns undeclared names into suggestions (issue 18)."""
    found: list[tuple[int, str]] = []
    for pattern, line in EXPLANATIONS:
        m = pattern.search(text)
        if m:
            found.append((m.start(), line))
    if names:
        found.extend(name_hints(text, names))
    lines: list[str] = []
    for _, line in sorted(found, key=lambda item: item[0]):
        if line not in lines and len(lines) < MAX_EXPLANATIONS:
            lines.append(line)
    return [f"wakeful: {line}" for line in lines]


def with_explanations(text: str, tags: str = "", names: frozenset[str] = frozenset()) -> tuple[str, bool]:
    """The failure ``error`` text: the explanations first (issue 18: the rule before clang's words), then the
    cleaned diagnostics cut so that both fit in 16 KiB."""
    lines = explanations(text + "\n" + tags, names)
    head = "".join(line + "\n" for line in lines)
    body, truncated = cut(text, MAX_DIAGNOSTIC_BYTES - len(head.encode()))
    if body and not body.endswith("\n"):
        body += "\n"
    return head + body, truncated


def restore_source(text: str, originals: Mapping[str, str]) -> str:
    """Quote the agent's own line instead of the driver-written ``out/main.i`` (build.md §4.3, §7).

    The compile step reads macro-expanded text, so clang quotes and columns that. File and line are right (line
    markers), so each quoted line of a bundle or SDK file (``originals``: shown name → text, never read from disk,
    so no host file can be quoted) is replaced by the original line, and the caret is moved onto it: kept where
    the text before it is unchanged, else moved to the marked token when that token occurs exactly once in both
    lines, else dropped with the column set to the line's first non-blank column. Every copy of the message
    header (clang repeats some backend errors) gets the same column.
    """
    lines = text.split("\n")
    out: list[str] = []
    columns: dict[tuple[str, str, str], int] = {}
    header: tuple[re.Match[str], list[str] | None] | None = None
    offset: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        m = HEADER.match(line)
        if m:
            source = originals.get(posixpath.normpath(m.group("file")))
            header, offset = (m, source.split("\n") if source is not None else None), None
            out.append(line)
            continue
        snip = SNIPPET.match(line)
        if not snip or header is None or header[1] is None:
            out.append(line)
            continue
        if offset is None:
            offset = _label_offset(lines, i - 1, int(header[0].group("line")))
        number = int(snip.group("num")) + offset
        if not 1 <= number <= len(header[1]):
            out.append(line)
            continue
        gutters = []
        while i < len(lines) and GUTTER.match(lines[i]):
            gutters.append(lines[i])
            i += 1
        raw = header[1][number - 1]
        label = str(number).rjust(len(snip.group("pad") + snip.group("num")))
        if snip.group("text") == printable(raw) and not offset:
            out.extend([line, *gutters])
            continue
        out.append(f"{label} | {printable(raw)}".rstrip())
        hm = header[0]
        if hm.group("line") != str(number):
            continue
        marks, column = _move_caret(snip.group("text"), raw, _gutter_text(gutters[0]) if gutters else "")
        if marks:
            out.append(f"{gutters[0][: gutters[0].index('|')]}| {marks}")
        columns.setdefault((hm.group("file"), hm.group("line"), hm.group("col")), column)
    return "\n".join(_recolumn(line, columns) for line in out)


def _label_offset(lines: list[str], start: int, line_number: int) -> int:
    """What to add to clang's snippet labels so the marked line carries the message's line number.

    clang 22 labels the snippet of a note inside an included header with the *including* file's line number
    (``wakeful.h:87`` quoted as ``10 | …``) although the text is the header's line; the message header is right.
    The snippet line with the caret under it is the message's line (else the first snippet line).
    """
    first: int | None = None
    for index in range(start, len(lines)):
        snip = SNIPPET.match(lines[index])
        if snip:
            first = int(snip.group("num")) if first is None else first
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if GUTTER.match(following) and "^" in following:
                return line_number - int(snip.group("num"))
        elif not GUTTER.match(lines[index]):
            break
    return line_number - first if first is not None else 0


def _move_caret(expanded: str, raw: str, marks: str) -> tuple[str, int]:
    """(new caret line text or "", clang-style byte column) for ``raw`` given the caret under ``expanded``."""
    original = printable(raw)
    caret = marks.find("^")
    first_non_blank = len(raw.encode()) - len(raw.lstrip().encode()) + 1
    if caret < 0:
        return "", first_non_blank
    end = len(marks.rstrip())
    if expanded[: caret + 1] == original[: caret + 1]:  # unchanged up to the caret
        kept = marks.rstrip() if expanded[:end] == original[:end] else " " * caret + "^"
        return kept, _byte_column(raw, caret)
    token = expanded[caret:end] if end - caret > 1 else _token_at(expanded, caret)
    if token:
        pattern = re.compile(rf"(?<!\w){re.escape(token)}(?!\w)" if re.fullmatch(r"\w+", token) else re.escape(token))
        spots = [hit.start() for hit in pattern.finditer(original)]
        if len(spots) == 1 and len(pattern.findall(expanded)) == 1:
            at = spots[0]
            return " " * at + "^" + "~" * (len(token) - 1), _byte_column(raw, at)
    return "", first_non_blank


def _token_at(line: str, pos: int) -> str:
    m = re.compile(r"\w+|\S").match(line, pos)
    return m.group(0) if m else ""


def _recolumn(line: str, columns: dict[tuple[str, str, str], int]) -> str:
    m = HEADER.match(line)
    if not m:
        return line
    column = columns.get((m.group("file"), m.group("line"), m.group("col")))
    return line if column is None else f"{m.group('file')}:{m.group('line')}:{column}{m.group('rest')}"


def printable(line: str) -> str:
    """A source line as clang shows it: tabs expanded to 8 columns, control characters as ``<U+XXXX>``."""
    return UNPRINTABLE.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", line.expandtabs(8))


def _gutter_text(gutter: str) -> str:
    m = GUTTER.match(gutter)
    return (m.group("text") if m else None) or ""


def _byte_column(raw: str, display: int) -> int:
    """clang's 1-based byte column of the character shown at ``display`` (tabs to 8 columns, escapes widened)."""
    shown = 0
    for index, char in enumerate(raw):
        if shown >= display:
            return len(raw[:index].encode()) + 1
        shown = (shown // 8 + 1) * 8 if char == "\t" else shown + len(printable(char))
    return len(raw.encode()) + 1

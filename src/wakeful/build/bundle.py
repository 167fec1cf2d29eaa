"""Bundle validation and normalisation (build.md §3): the request's files before anything reads them.

Raises ``BundleError(rule, message, path)`` for the first broken rule, in the spec's order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wakeful.errors import BundleError

MAX_FILES = 32
MAX_TOTAL_BYTES = 131_072
MAX_PATH_BYTES = 200
RESERVED_NAMES = frozenset({"wakeful.h", "spinfoam.h"})
PATH_CHARS = re.compile(r"[A-Za-z0-9_./-]+\Z")


@dataclass(frozen=True, slots=True)
class Bundle:
    """A validated bundle: ``files`` normalised (no CR, no leading BOM); ``request`` as received."""

    entry: str
    files: dict[str, str]
    request: dict[str, Any]

    def directories(self) -> frozenset[str]:
        """Every directory that exists in the bundle root ("" is the root itself)."""
        dirs = {""}
        for path in self.files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        return frozenset(dirs)


def validate(request: Mapping[str, Any]) -> Bundle:
    """Check a ``{sdk_version, entry, files}`` request (build.md §3) and return it normalised."""
    if not isinstance(request, Mapping):
        raise BundleError("request", "build request must be an object")
    _check_sdk_version(request.get("sdk_version"))
    files = _check_files_shape(request.get("files"))
    _check_count(files)
    _check_total_size(files)
    for path in files:
        _check_path_syntax(path)
    for path in files:
        _check_reserved(path)
    _check_file_dir_clash(files)
    _check_case_clash(files)
    for path, text in files.items():
        _check_content(path, text)
    entry = _check_entry(request.get("entry"), files)
    normalised = {path: normalise(text) for path, text in files.items()}
    received = {"sdk_version": 1, "entry": entry, "files": dict(files)}
    return Bundle(entry=entry, files=normalised, request=received)


def normalise(text: str) -> str:
    """§3 normalisation: CRLF → LF and a leading U+FEFF removed."""
    text = text.replace("\r\n", "\n")
    return text[1:] if text.startswith("\ufeff") else text


# build.md §3 rule `sdk_version`
def _check_sdk_version(value: object) -> None:
    if type(value) is not int or value != 1:
        raise BundleError("sdk_version", f"sdk_version must be 1, got {value!r}")


def _check_files_shape(files: object) -> dict[str, str]:
    if not isinstance(files, Mapping):
        raise BundleError("files", "files must be an object mapping paths to text")
    for path, text in files.items():
        if not isinstance(path, str) or not isinstance(text, str):
            raise BundleError("files", "every file path and content must be a string", _shown(path))
    return dict(files)


# build.md §3 rule `file count`
def _check_count(files: dict[str, str]) -> None:
    if not 1 <= len(files) <= MAX_FILES:
        raise BundleError("file count", f"a bundle holds 1..{MAX_FILES} files, got {len(files)}")


# build.md §3 rule `total size` (UTF-8 bytes as received)
def _check_total_size(files: dict[str, str]) -> None:
    total = sum(len(text.encode("utf-8", "surrogatepass")) for text in files.values())
    if total > MAX_TOTAL_BYTES:
        raise BundleError("total size", f"bundle is {total} bytes, over the {MAX_TOTAL_BYTES}-byte limit")


# build.md §3 rule `path syntax`
def _check_path_syntax(path: str) -> None:
    size = len(path.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_PATH_BYTES:
        raise BundleError("path syntax", f"path must be 1..{MAX_PATH_BYTES} bytes, got {size}", _shown(path))
    if not PATH_CHARS.match(path):
        raise BundleError("path syntax", "path may use only A-Z a-z 0-9 _ . / -", _shown(path))
    if path.startswith("/") or path.endswith("/"):
        raise BundleError("path syntax", "path may not start or end with '/'", path)
    if "//" in path:
        raise BundleError("path syntax", "path may not contain '//'", path)
    if any(part in (".", "..") for part in path.split("/")):
        raise BundleError("path syntax", "path may not have a '.' or '..' component", path)


# build.md §3 rule `reserved names`
def _check_reserved(path: str) -> None:
    if any(part in RESERVED_NAMES for part in path.split("/")):
        raise BundleError("reserved names", "wakeful.h and spinfoam.h cannot be shadowed", path)


# build.md §3 rule `no file/dir clash`
def _check_file_dir_clash(files: dict[str, str]) -> None:
    for path in sorted(files):
        parts = path.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if prefix in files:
                raise BundleError("no file/dir clash", f"{prefix!r} is both a file and a directory", prefix)


# build.md §3 rule `case clash`
def _check_case_clash(files: dict[str, str]) -> None:
    seen: dict[str, str] = {}
    for path in sorted(files):
        folded = path.lower()
        if folded in seen:
            raise BundleError("case clash", f"{seen[folded]!r} and {path!r} differ only in case", path)
        seen[folded] = path


# build.md §3 rule `content`
def _check_content(path: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError("content", "file is not valid UTF-8", path) from None
    if "\x00" in text:
        raise BundleError("content", "file contains a NUL byte", path)
    if re.search(r"\r(?!\n)", text):
        raise BundleError("bare CR", "a CR not followed by LF (bare CR)", path)
    if "\ufeff" in text[1:]:
        raise BundleError("byte order mark", "U+FEFF (byte order mark) is allowed only first", path)


# build.md §3 rule `entry`
def _check_entry(entry: object, files: dict[str, str]) -> str:
    if not isinstance(entry, str) or entry not in files:
        raise BundleError("entry", f"entry must name one of the files, got {entry!r}", _shown(entry))
    return entry


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:240]

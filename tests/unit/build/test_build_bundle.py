"""build.md §3: bundle rules in order, each naming its rule and path (row 13, row 22), and normalisation."""

from __future__ import annotations

import pytest

from wakeful.build.bundle import validate
from wakeful.errors import BundleError

OK = "int x;\n"


def req(files: dict[str, str], entry: str | None = None, sdk_version: object = 1) -> dict[str, object]:
    return {"sdk_version": sdk_version, "entry": entry or next(iter(files)), "files": files}


def refused(request: dict[str, object]) -> BundleError:
    with pytest.raises(BundleError) as info:
        validate(request)
    assert info.value.code == "invalid_bundle" and info.value.wire_code == "INVALID_PARAMS"
    return info.value


# row 13: every bad path names the rule and the path
@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../m.c", "path syntax"),
        ("/m.c", "path syntax"),
        ("a//m.c", "path syntax"),
        ("./m.c", "path syntax"),
        ("a/./m.c", "path syntax"),
        ("m.c/", "path syntax"),
        ("a" * 199 + ".c", "path syntax"),
        ("my file.c", "path syntax"),
        ("a\\b.c", "path syntax"),
        ("a\x00.c", "path syntax"),
        ("é.c", "path syntax"),
        ("wakeful.h", "reserved names"),
        ("x/spinfoam.h", "reserved names"),
        ("wakeful.h/m.c", "reserved names"),
    ],
)
def test_bundle_path_rules(path: str, rule: str) -> None:
    err = refused(req({"main.c": OK, path: OK}, "main.c"))
    assert err.rule == rule
    assert err.path == path or (not path.isascii() and err.path == "\\xc3\\xa9.c")


def test_bundle_200_byte_path_is_fine() -> None:
    validate(req({"a" * 198 + ".c": OK}))


def test_bundle_file_dir_clash_and_case_clash() -> None:
    assert refused(req({"a": OK, "a/b.c": OK}, "a/b.c")).rule == "no file/dir clash"
    err = refused(req({"A.c": OK, "a.c": OK}))
    assert err.rule == "case clash" and err.path == "a.c"


def test_bundle_counts_and_sizes() -> None:
    assert refused(req({f"f{i}.c": OK for i in range(33)}, "f0.c")).rule == "file count"
    assert refused({"sdk_version": 1, "entry": "m.c", "files": {}}).rule == "file count"
    validate(req({f"f{i}.c": OK for i in range(32)}, "f0.c"))
    big = "x" * 131_072
    validate(req({"m.c": big}))
    assert refused(req({"m.c": big, "n.c": "y"}, "m.c")).rule == "total size"
    # UTF-8 bytes, not characters
    assert refused(req({"m.c": "é" * 65_537})).rule == "total size"


def test_bundle_sdk_version_and_entry() -> None:
    assert refused(req({"m.c": OK}, sdk_version=2)).rule == "sdk_version"
    assert refused(req({"m.c": OK}, sdk_version=True)).rule == "sdk_version"
    assert refused(req({"m.c": OK}, entry="n.c")).rule == "entry"


def test_bundle_rule_order_count_before_paths() -> None:
    files = {f"../f{i}.c": OK for i in range(33)}
    assert refused(req(files, "../f0.c")).rule == "file count"


# row 22: bare CR, a backslash-CR splice, a BOM in the middle
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('// comment\r#include "/etc/passwd"\n', "bare CR"),
        ('#inc\\\rlude "/etc/passwd"\n', "bare CR"),
        ("int a;\n\ufeffint b;\n", "byte order mark"),
        ("int a;\x00\n", "content"),
        ("int \udc80;\n", "content"),
    ],
)
def test_bundle_content_rules(text: str, rule: str) -> None:
    err = refused(req({"m.c": text}))
    assert err.rule == rule and err.path == "m.c"


def test_bundle_normalises_crlf_and_leading_bom() -> None:
    b = validate(req({"m.c": "\ufeffint a;\r\nint b;\r\n"}))
    assert b.files["m.c"] == "int a;\nint b;\n"
    # the cache key uses the request as received
    assert b.request["files"]["m.c"] == "\ufeffint a;\r\nint b;\r\n"


def test_bundle_directories() -> None:
    b = validate(req({"a/b/c.h": OK, "m.c": OK}, "m.c"))
    assert b.directories() == frozenset({"", "a", "a/b"})


def test_bundle_not_a_mapping() -> None:
    with pytest.raises(BundleError):
        validate("nope")  # type: ignore[arg-type]
    assert refused({"sdk_version": 1, "entry": "m.c", "files": {"m.c": 3}}).rule == "files"

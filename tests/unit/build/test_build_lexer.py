"""build.md §4.1 lexing: splices, comments, literals with prefixes, pp-numbers, digraphs, refusals."""

from __future__ import annotations

from wakeful.build.lexer import LexFinding, Source, lines, tokens


def kinds(text: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokens(Source(text).text) if t.kind != "nl"]


def findings(text: str) -> list[str]:
    out: list[LexFinding] = []
    list(tokens(Source(text).text, out))
    return [f.message for f in out]


def test_lexer_splices_join_tokens_and_map_positions() -> None:
    src = Source("#inc\\\nlude x\n#inc\\ \t\nlude y\n")
    assert [t.text for t in lines(src.text).__next__()] == ["#", "include", "x"]
    toks = [t for t in tokens(src.text) if t.text == "y"]
    assert src.position(toks[0].start) == (4, 6)


def test_lexer_comments_are_whitespace_and_line_comments_continue_with_splices() -> None:
    assert kinds("a/* x */b // c \\\n d\ne") == [("ident", "a"), ("ident", "b"), ("ident", "e")]
    assert kinds("a /* unterminated\n b") == [("ident", "a")]


def test_lexer_newline_inside_block_comment_keeps_the_line() -> None:
    got = [[t.text for t in line] for line in lines("/* a\n */ # define A 1\nx /* q\n*/ # define B\n")]
    assert got == [["#", "define", "A", "1"], ["x", "#", "define", "B"]]
    first = [t.bol for t in next(iter(lines("/* a\n */ # define A 1\n")))]
    assert first[0] is True


def test_lexer_literals_with_prefixes() -> None:
    assert kinds('L"a" u"b" U"c" u8"d" L\'e\' u\'f\' U\'g\'') == [
        ("string", 'L"a"'), ("string", 'u"b"'), ("string", 'U"c"'), ("string", 'u8"d"'),
        ("char", "L'e'"), ("char", "u'f'"), ("char", "U'g'"),
    ]
    # u8 character literals are C23: in gnu17 u8 is an identifier
    assert kinds("u8'a'") == [("ident", "u8"), ("char", "'a'")]
    assert kinds(r'"a\"b" x') == [("string", r'"a\"b"'), ("ident", "x")]


def test_lexer_unterminated_literal_ends_at_line_end() -> None:
    assert kinds('"abc\n#x') == [("string", '"abc'), ("punct", "#"), ("ident", "x")]
    assert kinds("'a\ny") == [("char", "'a"), ("ident", "y")]


def test_lexer_pp_numbers() -> None:
    assert kinds("1e+x 0xe+x 1.e .5x 1..x 1$x 0x1p-3") == [
        ("number", t) for t in ["1e+x", "0xe+x", "1.e", ".5x", "1..x", "1$x", "0x1p-3"]
    ]
    assert kinds("...5") == [("punct", "..."), ("number", "5")]


def test_lexer_punctuators_and_digraphs() -> None:
    assert kinds("%:%: %: <: :> <% %> ## <<= ->") == [
        ("punct", t) for t in ["%:%:", "%:", "<:", ":>", "<%", "%>", "##", "<<=", "->"]
    ]


def test_lexer_directive_with_vt_ff_and_digraph() -> None:
    for text in ("\v#include x\n", "\f#include x\n", "%:include x\n", "  # /* c */ include x\n"):
        line = next(iter(lines(text)))
        assert line[0].bol and line[0].text in ("#", "%:") and line[1].text == "include"


def test_lexer_refusals() -> None:
    assert findings('R"x(a)x"') == ["raw string literal"]
    for prefix in ("LR", "uR", "UR", "u8R"):
        assert findings(prefix + '"x(a)x"') == ["raw string literal"]
    assert findings('xR"a" R "a" R') == []
    assert findings("int a\\u00e9;") == ["universal character name in identifier"]
    assert findings("int \\U000000e9;") == ["universal character name in identifier"]
    assert findings("int é;") == ["non-ASCII character outside a comment or literal"]
    assert findings('/* é */ "é" \'é\' // é\n') == []


def test_lexer_trigraphs_are_not_replaced() -> None:
    assert kinds("??=include") == [("punct", "?"), ("punct", "?"), ("punct", "="), ("ident", "include")]


def test_lexer_position_is_byte_column() -> None:
    src = Source('"é" x\n')
    x = [t for t in tokens(src.text) if t.text == "x"][0]
    assert src.position(x.start) == (1, 6)

"""The handle-memory estimator (runtime/footprint.py): counts taken from the compact encoding of nested
values, string widths, the cheap bound for small flat values, and agreement between the ways a box is made."""

from __future__ import annotations

import json

import pytest

from wakeful.runtime import footprint as fp
from wakeful.runtime import jsonval
from wakeful.runtime.handles import HandleSpace, entry_size


def cost(text: str) -> int:
    return jsonval.parse(text).cost


def test_a_nested_value_counts_each_container_member_string_and_number() -> None:
    # {} root with 2 members; "a" -> list of 3 (small int, float, string); "b" -> {}
    expected = (fp.DICT + 2 * fp.MEMBER + fp.LIST + 3 * fp.ITEM + fp.EMPTY
                + 3 * fp.STR + len("a") + len("b") + len("xy") + fp.NUMBER)
    assert cost('{"a":[1,2.5,"xy"],"b":{}}') == expected


def test_literals_and_cached_small_ints_cost_only_their_slot() -> None:
    assert cost("[true,false,null]") == fp.LIST + 3 * fp.ITEM
    # 1, 0 and 99 come from the interpreter's cache; 100, -6 and 256 are charged (-5 and 256 conservatively)
    assert cost("[1,0,99,100,-6,256,-5,1.0,0e1]") == fp.LIST + 9 * fp.ITEM + 6 * fp.NUMBER
    assert cost("[[7],{\"k\":8}]") == 2 * fp.LIST + 3 * fp.ITEM + fp.DICT + fp.MEMBER + fp.STR + 1


def test_text_inside_strings_is_not_mistaken_for_structure() -> None:
    tricky = '{"a:u":"na:u,[]{}","t":"true"}'
    plain = '{"xxx":"xxxxxxxxx","x":"xxxx"}'  # the same shape and string lengths
    assert cost(tricky) == cost(plain) == fp.DICT + 2 * fp.MEMBER + 4 * fp.STR + 3 + 9 + 1 + 4


def test_escaped_quotes_take_the_regex_path_with_the_same_counts() -> None:
    escaped = jsonval.from_python({"q": ['say "hi"', {"r": 'a\\"b'}]}).value
    same_shape = {"q": ["say xhix", {"r": "axxb"}]}
    assert b'\\"' in jsonval.encode(escaped)
    assert cost(jsonval.dumps(escaped)) == cost(jsonval.dumps(same_shape)) + 4  # 4 escapes, a byte each


@pytest.mark.parametrize(("char", "width"), [("\xe9", 1), ("\u4e00", 2), ("\U0001f600", 4)])
def test_non_ascii_strings_are_charged_by_their_widest_character(char: str, width: int) -> None:
    text = "a" * 99 + char
    assert cost(json.dumps([text, "bc"], ensure_ascii=False)) == (
        fp.LIST + 2 * fp.ITEM + 2 * fp.WIDE_STR + width * (100 + 2))
    assert fp.str_cost(text) == (len(text) * width + 72 + width + 15) // 16 * 16  # exact: header + chars


def test_small_flat_values_get_an_upper_bound_without_encoding() -> None:
    for value in ({"event": "tick", "n": 5}, ["\U0001f600" * 40, 1.5, None], {"k" * 200: "\u4e00" * 50}, [], {}):
        small = jsonval.from_python(value)
        assert small.size < fp.FLAT_EXACT
        assert small.cost >= jsonval.measure(value).cost, value  # measure estimates from the encoding
        assert small.cost <= 4 * jsonval.measure(value).cost + 2 * fp.DICT, value  # ... and stays small


def test_every_way_of_boxing_a_large_value_gives_one_cost() -> None:
    value = {"rows": [{"id": i, "name": f"row {i}", "tags": ["x", "\u4e00"]} for i in range(60)], "n": 60}
    text = jsonval.dumps(jsonval.from_python(value))
    parsed = jsonval.parse(text)
    assert parsed.size >= fp.FLAT_EXACT
    assert jsonval.from_python(value).cost == parsed.cost == jsonval.measure(value).cost
    assert jsonval.part_of({"inner": value}["inner"]).cost == parsed.cost
    assert jsonval.part_of(value["rows"]).cost == jsonval.parse(jsonval.dumps(value["rows"])).cost


def test_built_values_are_charged_like_parsed_ones() -> None:
    """set/push add to the parts' costs; a value built from pieces costs about what parsing it does."""
    built = jsonval.from_python({})
    for i in range(40):
        row = jsonval.with_member(jsonval.from_python({}), "id", jsonval.part_of(i * 1000))
        row = jsonval.with_member(row, "tags", jsonval.appended(jsonval.from_python([]), jsonval.part_of("t")))
        built = jsonval.with_member(built, f"k{i}", row)
    parsed = jsonval.parse(jsonval.dumps(built))
    assert (built.size, built.nodes) == (parsed.size, parsed.nodes)
    assert 0.9 < built.cost / parsed.cost < 1.15, (built.cost, parsed.cost)


def test_a_handle_is_charged_its_value_plus_its_own_overhead() -> None:
    table = HandleSpace().table()
    box = jsonval.parse('{"a":[1,2]}')
    table.add(box)
    table.add(b"12345")
    assert table.bytes == 2 * fp.HANDLE + box.cost + fp.bytes_cost(b"12345") == entry_size(box) + entry_size(b"12345")

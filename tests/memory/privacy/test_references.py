"""Ids inside JSON values: rewritten through an id map, dropped when they do not resolve."""

import pytest

from memory.privacy.references import InJson, json_ids, json_remap, json_specs

PLAYED = InJson(("*", "id"), {"lesson": "L", "knowledge": "K"}, by="type")
MEMBERS = InJson(("members", "*"), "D")
SELF = InJson(("id",), "O")
NESTED = InJson(("confirmed", "*", "id"), {"lesson": "L"}, by="type")
IDS = {"L": {1: 101}, "K": {2: 202}, "D": {3: 303, 4: 404}, "O": {5: 505}}


def resolve(label, pk):
    return IDS.get(label, {}).get(pk)


def test_it_rewrites_ids_in_lists_of_objects_and_keeps_other_keys():
    value = [{"type": "lesson", "id": 1, "note": "x"}, {"type": "knowledge", "id": 2}]
    new, tally = json_remap((PLAYED,), value, resolve)
    assert new == [{"type": "lesson", "id": 101, "note": "x"}, {"type": "knowledge", "id": 202}]
    assert (tally.remapped, tally.dropped) == (2, 0)


def test_it_drops_the_whole_element_when_its_id_does_not_resolve():
    value = [
        {"type": "lesson", "id": 9},
        {"type": "skill", "id": 1},
        {"type": "knowledge", "id": 2},
    ]
    new, tally = json_remap((PLAYED,), value, resolve)
    assert new == [{"type": "knowledge", "id": 202}]
    assert (tally.remapped, tally.dropped) == (1, 2)


def test_it_drops_bare_ids_from_a_list_and_nulls_a_key():
    new, tally = json_remap((MEMBERS,), {"source": "consolidation", "members": [3, 9, 4]}, resolve)
    assert new == {"source": "consolidation", "members": [303, 404]}
    assert tally.dropped == 1
    new, tally = json_remap((SELF,), {"id": 9, "passed": True}, resolve)
    assert new == {"id": None, "passed": True} and tally.dropped == 1


def test_several_declarations_on_one_column_and_nesting():
    body = {"id": 5, "confirmed": [{"type": "lesson", "id": 1}], "passed": True}
    new, tally = json_remap((SELF, NESTED), body, resolve)
    assert new == {"id": 505, "confirmed": [{"type": "lesson", "id": 101}], "passed": True}
    assert tally.remapped == 2


def test_values_of_the_wrong_shape_are_left_or_dropped_never_kept_as_ids():
    assert json_remap((MEMBERS,), {"members": "all"}, resolve)[0] == {"members": "all"}
    assert json_remap((MEMBERS,), None, resolve)[0] is None
    new, tally = json_remap((MEMBERS,), {"members": [3, "4", True]}, resolve)
    assert new == {"members": [303]} and tally.dropped == 2


def test_json_ids_lists_every_declared_id_with_its_table():
    value = [{"type": "lesson", "id": 1}, {"type": "mystery", "id": 7}]
    assert list(json_ids((PLAYED,), value)) == [("L", 1), (None, 7)]


def test_declarations_are_checked():
    with pytest.raises(ValueError):
        InJson((), "L")
    with pytest.raises(ValueError):
        InJson(("id",), {"lesson": "L"})  # a mapping needs `by`
    with pytest.raises(ValueError):
        InJson(("*",), {"lesson": "L"}, by="type")  # bare ids have no sibling
    assert json_specs((SELF,)) == (SELF,) and json_specs("memory.X") == ()

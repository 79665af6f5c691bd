import pytest

from pantry.recipes import parse_line, scale


def test_parse_line():
    assert parse_line("2 cup flour") == (2.0, "cup", "flour")


def test_parse_line_keeps_name_case():
    assert parse_line("1 tsp Maldon salt") == (1.0, "tsp", "Maldon salt")


def test_parse_line_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit"):
        parse_line("1 pinch salt")


def test_parse_line_too_short():
    with pytest.raises(ValueError, match="expected"):
        parse_line("flour")


def test_scale():
    assert scale([(2.0, "cup", "flour")], 1.5) == [(3.0, "cup", "flour")]


def test_scale_refuses_zero():
    with pytest.raises(ValueError):
        scale([(2.0, "cup", "flour")], 0)

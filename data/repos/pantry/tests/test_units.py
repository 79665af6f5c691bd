import pytest

from pantry.units import convert, kind, to_base


def test_kg_to_g():
    assert convert(2, "kg", "g") == 2000


def test_tsp_to_tbsp():
    assert convert(3, "tsp", "tbsp") == 1.0


def test_cup_to_ml():
    assert convert(1, "cup", "ml") == 240


def test_kind():
    assert kind("tbsp") == "volume"
    assert kind("kg") == "mass"


def test_mass_to_volume_refused():
    with pytest.raises(ValueError, match="cannot convert"):
        convert(1, "kg", "ml")


def test_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit"):
        to_base(1, "pinch")

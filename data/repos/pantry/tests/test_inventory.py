import pytest

from pantry.inventory import Inventory


def test_add_adds_up_across_units():
    inv = Inventory()
    inv.add("flour", 1, "kg")
    inv.add("flour", 500, "g")
    assert inv.quantity("flour") == 1500


def test_unknown_item_is_zero():
    assert Inventory().quantity("saffron") == 0


def test_add_refuses_other_kind():
    inv = Inventory()
    inv.add("milk", 1, "cup")
    with pytest.raises(ValueError, match="measured by volume"):
        inv.add("milk", 100, "g")


def test_remove_takes_out():
    inv = Inventory()
    inv.add("sugar", 500, "g")
    inv.remove("sugar", 200, "g")
    assert inv.quantity("sugar") == 300


def test_low_stock_below():
    inv = Inventory()
    inv.add("rice", 100, "g")
    inv.add("oats", 900, "g")
    assert inv.low_stock(200) == ["rice"]

"""Units: convert a quantity between kitchen units of the same kind (单位换算).

Mass is measured in grams, volume in millilitres; each unit is a multiple of one of them.
"""

MASS = ("g", "kg")
VOLUME = ("ml", "l", "tsp", "tbsp", "cup")


def to_base(amount, unit):
    """Amount in the base unit of its kind: grams or millilitres (换算成克或毫升).

    Example: to_base(2, "kg") -> 2000
    """
    if unit == "g":
        return amount
    elif unit == "kg":
        return amount * 1000
    elif unit == "ml":
        return amount
    elif unit == "l":
        return amount * 100
    elif unit == "tsp":
        return amount * 5
    elif unit == "tbsp":
        return amount * 15
    elif unit == "cup":
        return amount * 240
    raise ValueError(f"unknown unit {unit!r}")


def kind(unit):
    """'mass' or 'volume' (质量或体积). Example: kind("tsp") -> "volume"."""
    if unit in MASS:
        return "mass"
    if unit in VOLUME:
        return "volume"
    raise ValueError(f"unknown unit {unit!r}")


def convert(amount, unit, to):
    """Convert amount from one unit to another of the same kind (同类单位之间换算).

    Example: convert(3, "tsp", "tbsp") -> 1.0
    """
    if kind(unit) != kind(to):
        raise ValueError(f"cannot convert {kind(unit)} ({unit}) to {kind(to)} ({to})")
    return to_base(amount, unit) / to_base(1, to)

"""Recipe lines: parse "2 cup flour" and scale a recipe (菜谱行解析与缩放).

A line is an amount, a unit and a name. Amounts are numbers such as 2 or 0.5.
"""

from .units import kind

Ingredient = tuple  # (amount, unit, name)


def parse_line(line):
    """Parse one recipe line into (amount, unit, name) (解析一行配料).

    Example: parse_line("2 cup flour") -> (2.0, "cup", "flour")
    """
    parts = line.split(maxsplit=2)
    if len(parts) < 3:
        raise ValueError(f"expected 'amount unit name', got {line!r}")
    amount, unit, name = parts
    kind(unit)  # raises on an unknown unit
    return float(amount), unit, name


def scale(recipe, factor):
    """Each ingredient's amount times factor (按比例缩放).

    Example: scale([(2.0, "cup", "flour")], 1.5) -> [(3.0, "cup", "flour")]
    """
    if factor <= 0:
        raise ValueError("factor must be positive")
    return [(amount * factor, unit, name) for amount, unit, name in recipe]

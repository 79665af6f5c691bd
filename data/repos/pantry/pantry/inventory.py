"""Inventory: what is in the pantry, in grams or millilitres (库存清单).

Quantities are kept in the base unit of their kind, so "1 kg flour" and "500 g flour" add up.
"""

from .units import kind, to_base


class Inventory:
    """A stock list: item name -> quantity in base units (物品名 -> 数量).

    Example: inv = Inventory(); inv.add("flour", 1, "kg"); inv.quantity("flour") -> 1000
    """

    def __init__(self):
        self.items = {}
        self.kinds = {}

    def add(self, name, amount, unit):
        """Add stock. The first unit used for a name fixes its kind (第一次入库决定类别)."""
        if amount <= 0:
            raise ValueError("amount must be positive")
        kind_ = kind(unit)
        if self.kinds.setdefault(name, kind_) != kind_:
            raise ValueError(f"{name} is measured by {self.kinds[name]}, not {kind_}")
        self.items[name] = self.items.get(name, 0) + to_base(amount, unit)

    def remove(self, name, amount, unit):
        """Take stock out (出库)."""
        self.items[name] = self.items.get(name, 0) - to_base(amount, unit)

    def quantity(self, name):
        """Stock of one item in base units; 0 when unknown (未知物品为 0)."""
        return self.items.get(name, 0)

    def low_stock(self, threshold):
        """Names whose stock is at or below threshold, sorted (库存不高于阈值的物品)."""
        return sorted(n for n, q in self.items.items() if q < threshold)

"""pantry: unit conversion, a stock list and recipe lines (厨房工具：单位换算、库存、菜谱)."""

from .inventory import Inventory
from .recipes import parse_line, scale
from .units import convert

__all__ = ["Inventory", "convert", "parse_line", "scale"]

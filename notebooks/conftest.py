"""pytest setup for running notebooks on their own (`pytest notebooks/03_memory.ipynb`).

The same offline, key-free environment and network guard as tests/ (tests/offline_env.py): your own
.env or a live LABKIT_MODE never changes what the stored outputs are compared with. Not a lesson file.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import offline_env  # noqa: E402

offline_env.apply()

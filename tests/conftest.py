"""Test-wide setup: an offline, key-free environment and a guard against non-loopback connections.

Applied at import, before nbval starts any kernel, so notebooks executed by `pytest --nbval` run
exactly as .ci/execute_notebooks.py ran them when their outputs were saved (see offline_env.py).
"""
import offline_env

offline_env.apply()

"""Methods that apply to any benchmark: the paper's baselines and the library spec agents.

Layer: imports the kit only (tests/core/test_layering.py).
"""

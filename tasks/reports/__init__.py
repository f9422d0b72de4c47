"""Reports over recorded episodes: tables, metrics, paired comparisons, the paper's tables and plots.

Layer: imports the kit, the agents, the benchmarks and the harness's records; never the CLI.
"""

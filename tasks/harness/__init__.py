"""The evaluation harness: runner, episodes, executors (threads, Ray), records, identity, archive, locks.

Layer: imports the kit, the agents and the benchmarks (through the registry); never the reports or
the CLI.
"""

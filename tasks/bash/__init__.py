"""InterCode-Bash: the paper's Bash flow and its benchmark record.

Layer: imports the kit and the agents; no other benchmark, the harness, the reports or the CLI.
"""

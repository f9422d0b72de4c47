"""InterCode-SQL: the paper's SQL flow, its levers and transforms, SQL-only tools, its benchmark record.

Layer: imports the kit and the agents; no other benchmark, the harness, the reports or the CLI.
"""

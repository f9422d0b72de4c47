"""PDoctor: the planning flows, their benchmark record, a failure dissection and its report view.

Layer: imports the kit and the agents; no other benchmark, the harness, the reports or the CLI.
"""

"""Write or check the golden file of every built-in method's identity.

The golden file (``tests/tasks/golden/method_identities.json``) holds, for every built-in
benchmark, its prompts fingerprint and, for every method with the grammar on and off, the flow
name, the flow fingerprint and the view. Archived records (``docs/data/``) are found again only
while these stay the same, so ``tests/tasks/test_golden_identities.py`` compares today's code
with the file on every run.

Usage:
    python scripts/golden_identities.py          # check: exit 1 and list what changed
    python scripts/golden_identities.py --write  # after a deliberate change (say why in the commit)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "tasks" / "golden" / "method_identities.json"


def current_identities() -> dict[str, Any]:
    """``{benchmark: {"prompts_sha256": ..., "methods": {method: {"grammar"|"no_grammar": {...}}}}}``."""
    from stateflow.tasks.harness.identity import flow_fingerprint, prompts_fingerprint
    from stateflow.tasks.harness.registry import BUILTIN_BENCHMARKS

    out: dict[str, Any] = {}
    for bench in BUILTIN_BENCHMARKS:
        methods: dict[str, Any] = {}
        for name, method in sorted(bench.methods.items()):
            entry: dict[str, Any] = {"view": method.view().name}
            for key, grammar in (("grammar", True), ("no_grammar", False)):
                flow = method.build(grammar)
                entry[key] = {"flow": flow.name, "flow_sha256": flow_fingerprint(flow)}
            methods[name] = entry
        out[bench.name] = {"prompts_sha256": prompts_fingerprint(bench.prompts_dir), "methods": methods}
    return out


def changes(golden: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per method or benchmark whose identity differs (added and removed included)."""
    lines: list[str] = []
    for bench in sorted(set(golden) | set(current)):
        g, c = golden.get(bench), current.get(bench)
        if g is None or c is None:
            lines.append(f"{bench}: {'added' if g is None else 'removed'}")
            continue
        if g["prompts_sha256"] != c["prompts_sha256"]:
            lines.append(f"{bench}: prompts_sha256 {g['prompts_sha256'][:12]} -> {c['prompts_sha256'][:12]}")
        for name in sorted(set(g["methods"]) | set(c["methods"])):
            gm, cm = g["methods"].get(name), c["methods"].get(name)
            if gm != cm:
                what = "added" if gm is None else "removed" if cm is None else f"{gm} -> {cm}"
                lines.append(f"{bench} {name}: {what}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the golden file from today's code")
    args = parser.parse_args(argv)
    current = current_identities()
    if args.write:
        GOLDEN.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        n = sum(len(b["methods"]) for b in current.values())
        print(f"wrote {GOLDEN} ({n} methods)")
        return 0
    found = changes(json.loads(GOLDEN.read_text(encoding="utf-8")), current)
    for line in found:
        print(line)
    print("identities unchanged" if not found else f"{len(found)} identities changed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

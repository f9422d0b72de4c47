"""Set-up helper used by scripts/setup_local_llm.sh (no Typer/CLI import needed).

Usage::

    python -m stateflow.backends.local present PROFILE   # exit 0 when the model is cached and verified
    python -m stateflow.backends.local pull PROFILE [--offline]
"""

from __future__ import annotations

import argparse
import sys

from stateflow.backends.local.catalog import model_spec
from stateflow.backends.local.errors import LocalModelError
from stateflow.backends.local.store import ModelStore


def main(argv: list[str] | None = None) -> int:
    """Run the helper; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m stateflow.backends.local")
    sub = parser.add_subparsers(dest="cmd", required=True)
    present = sub.add_parser("present", help="exit 0 when MODEL is in the cache and verified")
    present.add_argument("model")
    pull = sub.add_parser("pull", help="assemble/download MODEL into the cache and verify it")
    pull.add_argument("model")
    pull.add_argument("--offline", action="store_true", help="never try Hugging Face")
    args = parser.parse_args(argv)
    store = ModelStore()
    try:
        spec = model_spec(args.model)
        if args.cmd == "present":
            return 0 if store.status(spec).present else 1
        loc = store.locate(spec, allow_network=not args.offline, progress=_dots())
        print(f"\n{spec.key}: {loc.path} (source: {loc.source}, verified size + sha256)")
        return 0
    except (LocalModelError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def _dots():
    last = [-1]

    def report(done: int, total: int, label: str) -> None:
        pct = done * 100 // max(total, 1)
        if pct // 10 != last[0]:
            last[0] = pct // 10
            print(f"  {label}: {pct}%", flush=True)

    return report


if __name__ == "__main__":
    sys.exit(main())

"""``python -m stateflow.envs.bash``: build or locate the sandbox base root (used by scripts/setup_bash.sh).

``--protection`` prints which protection against the host the sandbox has on this machine: the
mode, which host uid sandbox root is and why (as root: the mapped unprivileged uid of
:mod:`stateflow.envs.bash.idmap`, or host root with the fallback's reason), ``/proc``, ``/sys``
and the kept capabilities. ``--print-root`` prints the root sandboxes run on (as root: the
ownership-shifted copy, made on first use).
"""

from __future__ import annotations

import argparse
import sys

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.rootfs import DEFAULT_MIRROR, build_base_root, locate_base_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stateflow.envs.bash", description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--build-root", action="store_true", help="build the base root unless it is cached")
    action.add_argument(
        "--print-root", action="store_true", help="print the base root sandboxes use (as root: its id-shifted copy)"
    )
    action.add_argument("--protection", action="store_true", help="print the sandbox's protection mode here")
    parser.add_argument("--mirror", default=None, help=f"Debian mirror (default {DEFAULT_MIRROR})")
    args = parser.parse_args(argv)
    try:
        root = build_base_root(mirror=args.mirror) if args.build_root else locate_base_root()
        if args.protection:
            from stateflow.envs.bash.sandbox import Sandbox

            with Sandbox([root.path]) as box:
                print(box.describe())
            return 0
    except EnvironmentError_ as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(root.path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

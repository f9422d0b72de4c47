"""Child process for the cross-process claim test: claims a thread, says so, and holds it.

Usage: ``python -m tests.core.checkpoint.holder BACKEND ADDRESS THREAD OWNER``; prints ``claimed``
once the claim is held, then sleeps until killed.
"""

from __future__ import annotations

import sys
import time

from tests.core.checkpoint.stores import open_store


def main(backend: str, address: str, thread_id: str, owner: str) -> None:
    store = open_store(backend, address)
    with store.claim(thread_id, owner):
        print("claimed", flush=True)
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main(*sys.argv[1:5])

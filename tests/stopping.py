"""`python -m tests.stopping READY MODULE:NAME SECONDS RIG_ARGS...`: the rig CLI with one function slowed down, so a
test can send a real signal to a real process mid-work. After each call of NAME returns (some work is done: a partial
file or folder exists), READY is written and the process sleeps SECONDS; the test signals it then."""

from __future__ import annotations

import importlib
import pathlib
import sys
import time
from typing import Any


def main() -> None:
    ready, target, seconds, *args = sys.argv[1:]
    module, _, name = target.partition(":")
    owner: Any = importlib.import_module(module)
    *path, attr = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, attr)

    def slowed(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        pathlib.Path(ready).write_text("x")
        time.sleep(float(seconds))
        return out

    setattr(owner, attr, slowed)
    from rig.cli import app

    sys.argv = ["rig", *args]
    app()


if __name__ == "__main__":
    main()

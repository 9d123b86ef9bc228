"""Process memory: peak resident set size of this process (and finished children)."""

from __future__ import annotations

import resource
import sys


def peak_rss_bytes() -> int:
    """ru_maxrss is KiB on Linux and bytes on macOS."""
    scale = 1 if sys.platform == "darwin" else 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return own

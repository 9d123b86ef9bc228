"""Name normalisation shared by the gazetteer and the replay store."""

from __future__ import annotations

import re
import unicodedata

_WS = re.compile(r"\s+")


def normalise_name(text: str) -> str:
    """NFKC, casefold, collapsed whitespace: 'Café  Ekberg' == 'CAFÉ ekberg' == 'Cafe\u0301 Ekberg'."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()

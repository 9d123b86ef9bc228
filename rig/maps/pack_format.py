"""What a map pack directory holds, and reading its pack.json (below both the builder and the reader).

Layout of a pack directory (all plain, portable files):
    pack.json         PackInfo: extent, counts, source sha256, build time, builder versions
    graph.npz         nodes (lat, lon, osm id), directed edges with mode bits, flags, speeds, names
    areas.npz         land-use polygon rings (lat, lon columns, ring offsets, outer/inner flags)
    gazetteer.sqlite  places (POIs, streets, areas, address points) and area metadata
"""

from __future__ import annotations

from pathlib import Path

from rig.maps.records import PackInfo

FORMAT_VERSION = 1


# A pack.json is a few hundred bytes.
MAX_INFO_BYTES = 1 << 20


def read_info(pack_dir: str | Path) -> PackInfo:
    """The pack's pack.json through the bounded reader (a FIFO, a device, a huge or deeply nested file, a field of
    the wrong type is an InputError, a ValueError, naming the file and field); FileNotFoundError when there is none."""
    from rig.inputs import read_record

    path = Path(pack_dir) / "pack.json"
    if not path.exists():
        raise FileNotFoundError(f"{pack_dir}: not a map pack (no pack.json; build it with `rig maps build`)")
    info = read_record(path, PackInfo, max_bytes=MAX_INFO_BYTES)
    if info.format_version != FORMAT_VERSION:
        raise ValueError(f"{pack_dir}: pack format {info.format_version}, this rig reads {FORMAT_VERSION}; rebuild it")
    return info

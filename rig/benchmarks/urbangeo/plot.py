"""Knowledge accuracy per city as a self-contained SVG bar chart (the paper's Figure 5), from a run's results.

python -m rig.benchmarks.urbangeo.plot RUN_DIR [--out city_accuracy.svg]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rig.names import escape
from rig.records import EpisodeResult, write_atomic


def city_accuracy(results: list[EpisodeResult]) -> list[tuple[str, float, int]]:
    """(city, accuracy 0..1, questions) for the knowledge results, cities sorted by name."""
    by: dict[str, list[float]] = {}
    for r in results:
        if r.tags.get("module") == "knowledge":
            by.setdefault(r.tags.get("city", "?"), []).append(float(r.scores.get("correct") or 0.0))
    return [(c, sum(v) / len(v), len(v)) for c, v in sorted(by.items())]


def city_accuracy_svg(rows: list[tuple[str, float, int]], title: str = "Knowledge accuracy by city") -> str:
    bar_h, gap, left, width = 22, 8, 150, 560
    height = 40 + len(rows) * (bar_h + gap) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="12">',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    span = width - left - 70
    for i, (city, acc, n) in enumerate(rows):
        y = 36 + i * (bar_h + gap)
        out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(city)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{span * acc:.1f}" height="{bar_h}" fill="#2a6fdb"/>')
        out.append(f'<text x="{left + span * acc + 6:.1f}" y="{y + 15}">{100 * acc:.1f}% (n={n})</text>')
    if not rows:
        out.append('<text x="10" y="50">no knowledge results</text>')
    out.append("</svg>")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, default=Path("city_accuracy.svg"))
    a = ap.parse_args(argv)
    from rig.runformat import read_results

    if not (a.run_dir / "results.sqlite").is_file():
        ap.error(f"{a.run_dir}: no results.sqlite (is this a run directory?)")
    rows = city_accuracy(read_results(a.run_dir / "results.sqlite", "urbangeo"))
    write_atomic(a.out, city_accuracy_svg(rows))
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Dependency-free SVG plots (reports must open offline, so no CDN scripts and no matplotlib needed)."""

from __future__ import annotations

from html import escape


def scatter_svg(points: list[tuple[str, float | None, float | None]], x_label: str, y_label: str, title: str,
                width: int = 560, height: int = 360) -> str:
    """Labelled scatter; the Pareto front (lower x, higher y is better) is drawn as a line. Unmeasured points are left
    out."""
    pad_l, pad_r, pad_t, pad_b = 60, 20, 30, 45
    pts: list[tuple[str, float, float]] = [(n, x, y) for n, x, y in points if x is not None and y is not None]
    if not pts:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60"><text x="10" y="30">' \
               f'{escape(title)}: not measured</text></svg>'
    xs, ys = [p[1] for p in pts], [p[2] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(min(ys), 0.0), max(max(ys), 1e-9)
    if x1 == x0:
        x0, x1 = x0 * 0.9, x1 * 1.1 + 1e-9
    if y1 == y0:
        y1 = y0 + 1

    def sx(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * (width - pad_l - pad_r)

    def sy(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)

    front, best = [], float("-inf")
    for _n, x, y in sorted(pts, key=lambda p: (p[1], -p[2])):
        if y > best:
            front.append((x, y))
            best = y
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - pad_r}" y2="{height - pad_b}" stroke="#333"/>',
           f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{height - pad_b}" stroke="#333"/>',
           f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">{escape(x_label)}</text>',
           f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">'
           f'{escape(y_label)}</text>']
    for i in range(5):
        xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{sx(xv):.1f}" y="{height - pad_b + 14}" text-anchor="middle">{xv:.3g}</text>')
        out.append(f'<text x="{pad_l - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
    if len(front) > 1:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in front)
        out.append(f'<polyline points="{path}" fill="none" stroke="#c33" stroke-dasharray="4 3"/>')
    for n, x, y in pts:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" fill="#2a6fdb">'
                   f'<title>{escape(n)}</title></circle>')
        out.append(f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 7:.1f}">{escape(n)}</text>')
    out.append("</svg>")
    return "\n".join(out)

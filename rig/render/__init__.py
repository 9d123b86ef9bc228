"""Rendering runs: markdown and HTML reports, figures, the one-screen summary, and exports."""

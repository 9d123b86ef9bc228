"""A run folder: its manifest, its results store, the one reader (`RunFolder`), and the summary."""

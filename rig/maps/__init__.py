"""Offline map service: OSM map packs, replay store, map tools and provider dialects (see docs/maps.md).

Submodules are imported where used; importing the package does no work."""

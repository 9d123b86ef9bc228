"""UrbanGeoEval: knowledge probes and reasoning tasks generated from map packs, with a local judge (paper: UrbanGeoEval)."""

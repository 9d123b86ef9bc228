"""UrbanGeoEval: knowledge probes and reasoning tasks generated from map packs, judged locally (paper: UrbanGeoEval)."""

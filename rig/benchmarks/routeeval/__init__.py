"""RouteEval: running-route generation through one tool, validated on the offline map (paper: RouteEval)."""

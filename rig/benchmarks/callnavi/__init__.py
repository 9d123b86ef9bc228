"""CallNavi: API routing and parameter generation over unfiltered API lists (paper: CallNavi)."""

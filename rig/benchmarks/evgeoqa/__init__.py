"""EVGeoQA / GeoRover: charging stations near a second activity, found with four local tools (paper: EVGeoQA)."""

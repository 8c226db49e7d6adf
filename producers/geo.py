"""Places: great-circle distances, the cities of the default world, and the Handbook grid mapping."""

from __future__ import annotations

import numpy as np

EARTH_RADIUS_KM = 6371.0088

# (name, lat, lon, weight): where the default world's customers live and its terminals stand.
# Spread over Europe and North America so that a far-away city (> 1500 km) always exists.
CITIES = [
    ("Lisbon", 38.72, -9.14, 3), ("Madrid", 40.42, -3.70, 6), ("Barcelona", 41.39, 2.17, 5),
    ("Paris", 48.86, 2.35, 10), ("Lyon", 45.76, 4.84, 4), ("London", 51.51, -0.13, 10),
    ("Dublin", 53.35, -6.26, 3), ("Amsterdam", 52.37, 4.90, 5), ("Brussels", 50.85, 4.35, 4),
    ("Berlin", 52.52, 13.40, 7), ("Munich", 48.14, 11.58, 5), ("Milan", 45.46, 9.19, 5),
    ("Rome", 41.90, 12.50, 5), ("Vienna", 48.21, 16.37, 4), ("Warsaw", 52.23, 21.01, 5),
    ("Stockholm", 59.33, 18.07, 3), ("Helsinki", 60.17, 24.94, 2), ("Athens", 37.98, 23.73, 3),
    ("New York", 40.71, -74.01, 8), ("Toronto", 43.65, -79.38, 4),
]

KM_PER_DEG_LAT = 111.32

# Handbook mode: the Handbook's 100 x 100 grid, one unit = 1 km, its origin (0, 0) at 45.0 N 5.0 E.
HANDBOOK_ORIGIN = (45.0, 5.0)


def haversine_km(lat1, lon1, lat2, lon2):
    """Great-circle distance in km; works on scalars and numpy arrays alike."""
    lat1, lon1, lat2, lon2 = (np.radians(np.asarray(v, dtype=float)) for v in (lat1, lon1, lat2, lon2))
    a = (np.sin((lat2 - lat1) / 2) ** 2
         + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2)
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def offset_km(lat, lon, dx_km, dy_km):
    """Move east by ``dx_km`` and north by ``dy_km`` (flat-earth approximation, fine for tens of km)."""
    lat = np.asarray(lat, dtype=float)
    new_lat = lat + np.asarray(dy_km) / KM_PER_DEG_LAT
    new_lon = np.asarray(lon, dtype=float) + np.asarray(dx_km) / (KM_PER_DEG_LAT * np.cos(np.radians(lat)))
    return new_lat, new_lon


def grid_to_latlon(x, y):
    """The Handbook's grid coordinates (km) to lat/lon: x east and y north of ``HANDBOOK_ORIGIN``."""
    return offset_km(HANDBOOK_ORIGIN[0], HANDBOOK_ORIGIN[1], x, y)

"""The platform power forecast lives in the pure core (:mod:`wattsched.model.forecast`); re-exported here."""

from wattsched.model.forecast import HORIZONS, MAX_POINTS, Forecast, forecast

__all__ = ["HORIZONS", "MAX_POINTS", "Forecast", "forecast"]

"""The error every part raises for a bad input file."""


class DataError(ValueError):
    """A benchmark data file is missing, malformed, or too small for the request."""

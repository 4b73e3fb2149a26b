"""Data beyond one machine's disk: URLs in object storage and over HTTP, read and written through fsspec."""
from glyphforge.storage.location import (
    SECRET_OPTIONS,
    Location,
    MalformedURLError,
    UnsupportedURLError,
    is_url,
    parse_place,
)

__all__ = ["SECRET_OPTIONS", "Location", "MalformedURLError", "UnsupportedURLError", "is_url", "parse_place"]

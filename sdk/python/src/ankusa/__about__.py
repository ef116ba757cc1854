"""The package version: the gateway's version (the workspace ``Cargo.toml``), the same as
``pyproject.toml``'s; ``sdk/python/check`` fails when the three differ."""

__version__ = "0.1.0"

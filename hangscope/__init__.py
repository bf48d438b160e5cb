"""hangscope: find out why a multi-process GPU job is hung."""

__version__ = "0.1.0"

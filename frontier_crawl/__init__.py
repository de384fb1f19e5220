"""frontier-crawl: a polite, crash-safe, memory-bounded web crawler engine."""

__version__ = "0.1.0"

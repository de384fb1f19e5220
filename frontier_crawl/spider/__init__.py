"""Spiders: user callbacks, items, pipelines and ``[[extract]]`` rules (see ``extract.py``)."""

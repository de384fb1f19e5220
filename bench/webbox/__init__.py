"""A web in a box: a deterministic web of up to millions of hosts, generated on the fly.

``model`` is the web (pure functions of a seed), ``server`` the HTTP generator that serves it
(also as an HTTP proxy), ``dns`` a name server that answers its host names, ``netns`` the
private network namespace a crawl of it runs in (no packet, no DNS query leaves it), and
``access`` reads the generator's request logs back. See bench/README.md.
"""

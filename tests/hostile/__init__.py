"""Hostile test servers: a raw-socket HTTP server, the hostile site, local proxies and DNS."""

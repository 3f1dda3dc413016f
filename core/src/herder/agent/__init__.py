"""``herder agent``: the client as a daemon, driven over an HTTP API (SPEC §10)."""

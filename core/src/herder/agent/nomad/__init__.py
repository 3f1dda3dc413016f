"""The Nomad-compatible API (SPEC §17): a subset of Nomad's HTTP API on a listener of its own
(``[nomad_api] bind``), so that the ``nomad`` command line and clients of Nomad's API drive the agent.

It is a front end like herder's own API: its routes call the same use cases of
:class:`herder.app.Agent` and only translate to Nomad's shapes (:mod:`.models`,
filled by :mod:`.shapes`).
What Nomad has and herder does not (evaluations, deployments, job versions) is
derived from the agent's allocations by :mod:`.ledger`.
"""

from herder.agent.nomad.api import asgi

__all__ = ["asgi"]

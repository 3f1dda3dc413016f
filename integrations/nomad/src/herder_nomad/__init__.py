"""herder as a Nomad task driver: the ``nomad-driver-herder`` plugin (see docs/nomad.md)."""

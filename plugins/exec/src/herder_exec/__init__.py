"""herder's exec driver: a host program, isolated by runc (see :mod:`herder_exec.driver`)."""

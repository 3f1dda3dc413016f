"""herder's rkt driver: App Container images run by the rkt command line (see :mod:`herder_rkt.driver`)."""

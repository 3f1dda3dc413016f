"""herder-docker: the docker driver for herder (entry point ``herder.drivers: docker``)."""

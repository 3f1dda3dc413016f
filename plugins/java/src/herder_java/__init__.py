"""herder's java driver: JVM applications, isolated by herder-exec where it is there (see :mod:`herder_java.driver`)."""

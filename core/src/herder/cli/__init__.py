"""The ``herder`` command line: :mod:`.main` has the commands, :mod:`.render` the event views."""

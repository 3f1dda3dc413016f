"""``python -m herder.supervisor DATA_DIR``: start the process supervisor of a data dir.

Returns once the supervisor listens (it goes on in the background), or at
once when one is running already. :class:`herder.supervisor.Supervisor` starts
it this way when nothing listens.
"""

from __future__ import annotations

import sys
from pathlib import Path

from herder.supervisor.server import serve


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m herder.supervisor DATA_DIR", file=sys.stderr)
        return 2
    return serve(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())

"""``python -m herder.supervisor [--cgroups auto|none|PATH] DATA_DIR``: start the process supervisor of a data dir.

Returns once the supervisor listens (it goes on in the background), or at
once when one is running already. :class:`herder.supervisor.Supervisor` starts
it this way when nothing listens.

``--cgroups`` says where each supervised process gets a cgroup that holds it
and everything it starts: ``auto`` (the default) picks a writable hierarchy
when running as root; ``none`` tracks processes by session and parentage
instead; a path names the hierarchy (a cgroup v2 mount, or a v1 one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from herder.supervisor.proctree import cgroup_hierarchy
from herder.supervisor.server import serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m herder.supervisor",
                                     description="Start the process supervisor of a data dir.")
    parser.add_argument("--cgroups", default="auto", metavar="auto|none|PATH",
                        help="where supervised processes get their cgroups (default: auto)")
    parser.add_argument("data_dir", type=Path, metavar="DATA_DIR")
    args = parser.parse_args(argv)
    if args.cgroups == "auto":
        cgroups = cgroup_hierarchy()
    elif args.cgroups == "none":
        cgroups = None
    else:
        cgroups = Path(args.cgroups)
        if not (cgroups / "cgroup.procs").is_file():
            parser.error(f"--cgroups: {cgroups} is not a cgroup hierarchy")
    return serve(args.data_dir, cgroups)


if __name__ == "__main__":
    sys.exit(main())

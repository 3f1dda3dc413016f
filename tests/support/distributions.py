"""Real distributions for tests: a ``.dist-info`` with entry points, placed on ``sys.path``.

``importlib.metadata`` finds them exactly as it finds an installed wheel, so
plugin discovery is exercised end to end without a build step.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def make_distribution(site: Path, name: str, version: str, entry_points: Mapping[str, Mapping[str, str]],
                      modules: Mapping[str, str]) -> Path:
    """Write ``modules`` (file name -> source) and a dist-info declaring ``entry_points`` into ``site``."""
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    sections = []
    for group, eps in entry_points.items():
        sections.append(f"[{group}]\n" + "".join(f"{ep} = {target}\n" for ep, target in eps.items()))
    (dist_info / "entry_points.txt").write_text("\n".join(sections))
    for filename, source in modules.items():
        (site / filename).write_text(source)
    return dist_info

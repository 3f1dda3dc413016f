"""Rebuild app.tar.gz from app/ byte for byte the same (fixed times, owners and order),
so that the checksum in job.nomad stays right: `python3 build.py`, then update the checksum it prints."""

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

HERE = Path(__file__).parent


def build() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted((HERE / "app").rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(HERE / "app")))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if path.is_dir() or info.mode & 0o100 else 0o644
            with open(path, "rb") if path.is_file() else io.BytesIO() as data:
                tar.addfile(info, data if path.is_file() else None)
    return gzip.compress(buffer.getvalue(), mtime=0)


if __name__ == "__main__":
    data = build()
    (HERE / "app.tar.gz").write_bytes(data)
    print("sha256:" + hashlib.sha256(data).hexdigest())

"""A command line on a real pseudo-terminal, as a person at a shell runs it: the terminal is its
controlling terminal (so resizing it sends SIGWINCH), and what it prints is read as it comes."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence

from tests.support.waiting import TIMEOUT


def _take_terminal() -> None:  # runs in the child: the pty becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``argv`` on a new pseudo-terminal of 24 rows and 80 columns."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.master, self.slave = os.openpty()
        self.set_size(24, 80)
        self.initial = termios.tcgetattr(self.slave)
        self.proc = subprocess.Popen(list(argv), stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     env=dict(env), start_new_session=True, preexec_fn=_take_terminal)
        self.output = bytearray()
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: the last process holding the terminal is gone
                data = b""
            with self.changed:
                self.output.extend(data)
                self.changed.notify_all()
            if not data:
                return

    def set_size(self, rows: int, columns: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def type(self, text: bytes) -> None:
        os.write(self.master, text)

    def shows(self, pattern: bytes, timeout: float = TIMEOUT) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: re.search(pattern, self.output) is not None, timeout)

    def expect(self, pattern: bytes) -> None:
        assert self.shows(pattern), f"{pattern!r} did not show; the terminal shows {bytes(self.output)!r}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.slave)  # the reader then reads EIO and ends
        self.reader.join(TIMEOUT)
        os.close(self.master)

"""Nomad's framed file streams (``/v1/client/fs/logs``, ``/v1/client/fs/stream``): one JSON object a frame.

A frame carries base64 ``Data`` read at ``Offset`` of ``File``, or a ``FileEvent``
(``file truncated``, ``file deleted``); ``{}`` is a heartbeat, sent while a
followed file is idle, which Nomad's client discards.
"""

import base64
import json

FRAME_SIZE = 64 << 10
"""The most bytes in one frame, as Nomad's."""
HEARTBEAT_FRAME = b"{}"
HEARTBEAT = 1.0
"""Seconds between heartbeat frames of an idle stream."""
FOLLOW_POLL = 0.1
"""How often a followed file is looked at again for more."""
TRUNCATED = "file truncated"
DELETED = "file deleted"


class Framer:
    """The frames of one file's bytes, in order from ``position``."""

    def __init__(self, file: str, position: int) -> None:
        self.file = file
        self.position = position

    def data(self, data: bytes) -> bytes:
        """The frame of ``data``, read where the previous frame ended."""
        frame = self._frame(data, "")
        self.position += len(data)
        return frame

    def event(self, event: str, position: int) -> bytes:
        """The frame of a file event (:data:`TRUNCATED`, :data:`DELETED`); reading goes on at ``position``."""
        self.position = position
        return self._frame(b"", event)

    def _frame(self, data: bytes, event: str) -> bytes:
        return json.dumps({"Offset": self.position, "Data": base64.b64encode(data).decode("ascii"),
                           "File": self.file, "FileEvent": event}).encode("ascii")

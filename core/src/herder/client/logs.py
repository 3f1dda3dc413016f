"""Log sinks: ``ctx.stdout`` and ``ctx.stderr``, for drivers whose output is not a supervised process's.

A task started through the supervisor has its output written by the
supervisor. A driver that gets the output some other way (a container's log
stream) writes it to the task's :class:`LogSink`: the write end of a pipe,
and a thread that moves everything read from it into the same rotating files
(:mod:`herder.supervisor.logfiles`). A sink costs nothing until it is used.

The thread moves the bytes with the supervisor's own log pump
(:class:`herder.supervisor.pump.LogPump`: ``splice(2)`` where the kernel
allows it), so the task only ever waits on the disk once the pipe's buffer
(enlarged to 1 MiB where the system allows) is full, and output the disk
cannot take (it is full, say) is dropped and counted rather than blocking it.
"""

from __future__ import annotations

import io
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Self

from herder.model import LogConfig
from herder.supervisor.logfiles import STREAMS, RotatingFile
from herder.supervisor.pump import Dropped, LogPump, enlarge_pipe

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = logging.getLogger(__name__)

BUFFER_SIZE = 64 * 1024
"""The reader's buffer: what output goes through where it cannot be spliced, or is dropped."""

DRAIN_TIMEOUT = 5.0
"""How long :meth:`LogSink.close` waits for the task's processes to let go of the pipe."""


class LogSink(io.RawIOBase, BinaryIO):
    """One stream (stdout or stderr) of a task, captured into rotating files.

    A write-only binary file object: pass it as ``stdout=`` / ``stderr=`` to
    :class:`subprocess.Popen` (the child inherits :meth:`fileno`, the write end
    of a pipe), or :meth:`write` to it (for drivers that stream logs). A sink
    lives as long as its task, across restarts, so a restarted task continues
    the same files.

    ``on_unsafe`` hears (in the sink's thread) of anything planted at a log
    file's name, which was removed rather than followed; ``on_dropped`` of
    output the disk could not take (see :class:`~herder.supervisor.pump.Dropped`).
    """

    def __init__(
        self, logs_dir: Path, task_name: str, stream: str, config: LogConfig | None = None,
        on_unsafe: Callable[[str], None] | None = None, on_dropped: Callable[[Dropped], None] | None = None,
    ) -> None:
        if stream not in STREAMS:
            raise ValueError(f"unknown log stream {stream!r}, expected one of {STREAMS}")
        super().__init__()
        self.logs_dir = logs_dir
        self.task_name = task_name
        self.stream = stream
        self.config = config or LogConfig()
        self.on_unsafe = on_unsafe
        self.on_dropped = on_dropped
        if self.config.max_files < 1 or self.config.max_file_size < 1:
            raise ValueError("logs need max_files >= 1 and max_file_size >= 1")
        self._write_fd = -1
        self._write_lock = threading.Lock()
        self._finish_lock = threading.Lock()
        self._stopping = threading.Event()
        self._started = False
        self._finished = False
        self._closed = False

    def _start(self) -> None:
        """Open the pipe and start the reader, on first use: most tasks' processes
        write through the supervisor, and never touch their sink."""
        file = RotatingFile(self.logs_dir, self.task_name, self.stream, self.config.max_files,
                            self.config.max_file_size, self.on_unsafe)
        read_fd, self._write_fd = os.pipe()
        enlarge_pipe(self._write_fd)
        os.set_blocking(read_fd, False)
        self._pump = LogPump(self.stream, read_fd, file, self.on_dropped)
        self._wake_read, self._wake_write = os.pipe()
        self._buffer = memoryview(bytearray(BUFFER_SIZE))
        self._thread = threading.Thread(
            target=self._run, name=f"logs-{self.task_name}-{self.stream}", daemon=True
        )
        self._thread.start()
        self._started = True

    def __repr__(self) -> str:
        return f"<LogSink {self.task_name}.{self.stream}{' closed' if self.closed else ''}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def fileno(self) -> int:
        """The pipe's write end, for a child process to inherit."""
        with self._write_lock:
            if self._closed:
                raise ValueError("log sink is closed")
            if not self._started:
                self._start()
            return self._write_fd

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        """Write all of ``data``; blocks only while the pipe's buffer is full."""
        view = memoryview(data).cast("B")
        total = len(view)
        with self._write_lock:
            if self._closed:
                raise ValueError("write to a closed log sink")
            if not self._started:
                self._start()
            while view:
                view = view[os.write(self._write_fd, view) :]
        return total

    def flush(self) -> None:
        """Nothing to do: nothing is buffered in this process."""

    def close(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Close the write end and wait until everything written is on disk.

        If a process (say, an orphan of the task) still holds the pipe after
        ``timeout`` seconds, what the pipe holds is saved and capture stops;
        that process then gets ``EPIPE`` on its next write.
        """
        self._close_writer()
        self._finish(time.monotonic() + timeout)

    def _close_writer(self) -> None:
        with self._write_lock:
            self._closed = True
            if self._write_fd >= 0:
                os.close(self._write_fd)
                self._write_fd = -1

    def _finish(self, deadline: float) -> None:
        if not self._started:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._finish_lock:
            if self._finished:
                return
            if self._thread.is_alive():
                log.warning(
                    "%s of task %s: a process still holds the log pipe; capture stops",
                    self.stream,
                    self.task_name,
                )
                self._stopping.set()
                os.write(self._wake_write, b"\0")
                self._thread.join()
            os.close(self._wake_read)
            os.close(self._wake_write)
            self._finished = True

    def _run(self) -> None:
        """The reader thread: move the pipe's bytes into the files until end of input, or until told to stop."""
        poller = select.poll()
        poller.register(self._pump.fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        try:
            # Wait, then move what is there: one poll and one splice per burst of output. (Moving until the
            # pipe is empty would cost a failed splice, and its exception, at each burst.)
            while not self._stopping.is_set():
                poller.poll()
                if self._pump.pump(self._buffer) == 0:
                    return
            self._pump.drain(self._buffer)
        except Exception:
            log.exception("%s of task %s: log capture failed", self.stream, self.task_name)
        finally:
            self._pump.close()


@dataclass(frozen=True)
class TaskLogs:
    """The stdout and stderr sinks of one task."""

    stdout: LogSink
    stderr: LogSink

    @classmethod
    def open(cls, logs_dir: Path, task_name: str, config: LogConfig | None = None,
             on_unsafe: Callable[[str], None] | None = None,
             on_dropped: Callable[[Dropped], None] | None = None) -> TaskLogs:
        """Start capturing both streams of ``task_name`` into ``logs_dir``.

        ``on_unsafe`` and ``on_dropped``: as for :class:`LogSink`.
        """
        stdout = LogSink(logs_dir, task_name, "stdout", config, on_unsafe, on_dropped)
        try:
            stderr = LogSink(logs_dir, task_name, "stderr", config, on_unsafe, on_dropped)
        except BaseException:
            stdout.close()
            raise
        return cls(stdout=stdout, stderr=stderr)

    def close(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Close both sinks, waiting at most ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        for sink in (self.stdout, self.stderr):
            sink._close_writer()
        for sink in (self.stdout, self.stderr):
            sink._finish(deadline)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

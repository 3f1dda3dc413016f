"""Getting images (local, loaded from a tarball, or pulled) and removing them when unused.

One pull per image at a time: tasks that want an image being pulled wait for
that pull and see its progress. An image herder itself pulled or loaded is
removed ``cleanup_image_delay`` after the last task using it finished, unless
a task wants it again meanwhile or a container still uses it. An image that
was already on the host is left alone. The delay is waited out by herder's
deferred cleanup (:class:`herder.CleanupLater`), so it survives the herder
process: the next herder on the data dir removes the image when due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import requests

from herder import DriverError, RecoverableError

log = logging.getLogger(__name__)

Progress = Callable[[str, dict[str, int]], None]
"""Called with a message and ``{"current": bytes, "total": bytes}`` while an image downloads."""

PROGRESS_INTERVAL = 1.0


@dataclass
class _Pull:
    """A pull in flight, shared by every task that wants the image."""

    listeners: list[Progress] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None


_AUTH_ERRORS = ("unauthorized", "access denied", "authentication required", "no basic auth credentials")
_FINAL_PULL_ERRORS = ("not found", "manifest unknown", *_AUTH_ERRORS)


def auth_refused(error: Exception) -> bool:
    """Whether a pull failed because the registry refused the credentials (or wanted some)."""
    return any(words in str(error).lower() for words in _AUTH_ERRORS)


def _pull_error(ref: str, message: str) -> Exception:
    """A missing image or refused credentials will not change by retrying; any
    other pull error (the registry down, DNS) may: recoverable, as in Nomad."""
    error = f"cannot pull image {ref}: {message}"
    if any(final in message.lower() for final in _FINAL_PULL_ERRORS):
        return DriverError(error)
    return RecoverableError(error)


def _split(ref: str) -> tuple[str, str]:
    repository, _, tag = ref.rpartition(":")
    return repository, tag


class Images:
    """The images the docker driver's tasks use on this node."""

    def __init__(self, client: Callable[[], docker.DockerClient], cleanup_delay: float, pull_timeout: float) -> None:
        self._client = client
        self._cleanup_delay = cleanup_delay
        self._pull_timeout = pull_timeout
        self._lock = threading.Lock()
        self._pulls: dict[str, _Pull] = {}
        self._users: dict[str, set[str]] = {}
        self._released: dict[str, float] = {}

    # -- getting an image ----------------------------------------------------

    def ensure(self, ref: str, user: str, *, force_pull: bool, tarball: Path | None,
               progress: Progress, auth: Mapping[str, str] | None = None) -> bool:
        """Make ``ref`` available for ``user`` (a task); True if herder fetched it (pulled or loaded).

        ``auth`` (``username``, ``password``, ...) are the registry credentials of
        the pull; without them the daemon's own are used.
        """
        self._use(ref, user)
        if tarball is not None:
            self._load(ref, tarball)
            return True
        if not force_pull and self.exists(ref):
            return False
        self._pull_shared(ref, progress, force_pull, auth)
        return True

    def ensure_kept(self, ref: str, *, timeout: float, progress: Progress) -> None:
        """Make ``ref`` available, pulling it within ``timeout`` seconds if absent, without
        counting a user: for an image herder keeps once it has it (the pause containers' ``infra_image``)."""
        if not self.exists(ref):
            self._pull_shared(ref, progress, False, None, timeout)

    def exists(self, ref: str) -> bool:
        try:
            self._client().images.get(ref)
        except docker.errors.ImageNotFound:
            return False
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise RecoverableError(f"cannot inspect image {ref}: {exc}") from exc
        return True

    def _load(self, ref: str, tarball: Path) -> None:
        try:
            with tarball.open("rb") as data:
                loaded = self._client().images.load(data)
        except OSError as exc:
            raise DriverError(f"cannot read image tarball {tarball}: {exc}") from exc
        except docker.errors.APIError as exc:
            raise DriverError(f"cannot load image tarball {tarball}: {exc.explanation or exc}") from exc
        tags = {tag for image in loaded for tag in image.tags}
        if ref not in tags:
            raise DriverError(f"image tarball {tarball} holds {', '.join(sorted(tags)) or 'no tagged image'}, "
                              f"not {ref}")

    def _pull_shared(self, ref: str, progress: Progress, force: bool, auth: Mapping[str, str] | None,
                     timeout: float | None = None) -> None:
        """Pull ``ref`` within ``timeout`` (default ``pull_timeout``), or wait for the pull of it already under way."""
        timeout = self._pull_timeout if timeout is None else timeout
        with self._lock:
            pull = self._pulls.get(ref)
            leader = pull is None
            if pull is None:
                pull = self._pulls[ref] = _Pull()
            pull.listeners.append(progress)
        if leader:
            try:
                # A pull that ended between our look and now has left the image.
                if force or not self.exists(ref):
                    self._pull(ref, pull, auth, timeout)
            except Exception as exc:
                pull.error = exc
            finally:
                with self._lock:
                    del self._pulls[ref]
                pull.done.set()
        else:
            progress(f"Downloading image {ref}", {})
            if not pull.done.wait(timeout + 5):
                raise DriverError(f"pull of image {ref} did not finish within {timeout:g}s")
        if pull.error is not None:
            raise pull.error

    def _pull(self, ref: str, pull: _Pull, auth: Mapping[str, str] | None, timeout: float) -> None:
        """Pull ``ref``, telling listeners how far it got about once a second."""
        repository, tag = _split(ref)
        for listener in list(pull.listeners):
            listener(f"Downloading image {ref}", {})
        layers: dict[str, tuple[int, int]] = {}
        deadline = time.monotonic() + timeout
        last_report = 0.0
        try:
            for line in self._client().api.pull(repository, tag=tag, stream=True, decode=True,
                                                   auth_config=dict(auth) if auth else None):
                if "error" in line:
                    raise _pull_error(ref, str(line["error"]))
                detail = line.get("progressDetail") or {}
                if line.get("status") == "Downloading" and "total" in detail:
                    layers[line.get("id", "")] = (int(detail.get("current", 0)), int(detail["total"]))
                now = time.monotonic()
                if now > deadline:
                    raise DriverError(f"pull of image {ref} did not finish within {timeout:g}s")
                if layers and now - last_report >= PROGRESS_INTERVAL:
                    last_report = now
                    current, total = (sum(values) for values in zip(*layers.values(), strict=True))
                    for listener in list(pull.listeners):
                        listener(f"Downloading image {ref}: {current / 1e6:.1f} of {total / 1e6:.1f} MB",
                                 {"current": current, "total": total})
        except docker.errors.APIError as exc:  # before RequestException, its base class
            raise _pull_error(ref, str(exc.explanation or exc)) from exc
        except requests.RequestException as exc:
            raise RecoverableError(f"pull of image {ref} broke off: {exc}") from exc
        if not self.exists(ref):
            raise DriverError(f"cannot pull image {ref}: the pull ended without the image")

    # -- users and removal ---------------------------------------------------

    def _use(self, ref: str, user: str) -> None:
        with self._lock:
            self._users.setdefault(ref, set()).add(user)

    def release(self, ref: str, user: str) -> None:
        """``user`` (a task) is finished with ``ref``."""
        with self._lock:
            users = self._users.get(ref, set())
            if user in users:  # not when cleanup is called again for the same task
                users.discard(user)
                self._released[ref] = time.time()

    def remove_when_unused(self, ref: str) -> float:
        """Remove ``ref`` if no task has used it for ``cleanup_image_delay``; else
        the seconds to wait before asking again (a task wants it again, or one
        released it less than the delay ago). 0 once it is removed or gone."""
        with self._lock:
            if self._users.get(ref):
                return self._cleanup_delay or 1.0
            wait = self._released.get(ref, 0.0) + self._cleanup_delay - time.time()
            if wait > 0:
                return wait
            self._released.pop(ref, None)
        try:
            client = self._client()
            if client.containers.list(all=True, filters={"ancestor": ref}):
                log.info("image %s is still used by a container: not removed", ref)
                return 0.0
            client.images.remove(ref)
            log.info("removed image %s", ref)
        except docker.errors.ImageNotFound:
            pass
        except (docker.errors.APIError, requests.RequestException) as exc:
            log.warning("cannot remove image %s: %s", ref, exc)
        return 0.0

"""Who uses an embedded PostgreSQL: one lock file per user (an `EmbeddedPostgres` that started or
joined the server), flocked for as long as it uses the server. The kernel drops a flock when its
process dies, however it dies, so a crashed process never counts as a user; the last live user to
leave stops the server, whichever process started it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path
from typing import IO


class HomeUsers:
    """This user's registration in `directory`. Every method expects the caller to hold the data
    directory's lock (`pg.lock`): a file is created and flocked in one step as far as others can see,
    so a scan never mistakes a user that is joining for a stale file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._path: Path | None = None
        self._handle: IO[str] | None = None

    @property
    def joined(self) -> bool:
        return self._handle is not None

    def join(self) -> None:
        if self._handle is not None:
            return
        self.directory.mkdir(mode=0o700, exist_ok=True)
        path = self.directory / f"{os.getpid()}-{secrets.token_hex(4)}.lock"
        handle = path.open("w")  # not inherited by children: Python opens files close-on-exec
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._path, self._handle = path, handle

    def leave(self) -> None:
        if self._handle is None:
            return
        if self._path is not None:
            self._path.unlink(missing_ok=True)
        self._handle.close()
        self._path = self._handle = None

    def others(self) -> int:
        """How many other live users there are; removes the files of users that died."""
        live = 0
        for path in sorted(self.directory.glob("*.lock")):
            if path == self._path:
                continue
            try:
                handle = path.open("a")
            except FileNotFoundError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    live += 1
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # nobody holds it: its process is gone
        return live

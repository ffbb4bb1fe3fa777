"""Run Python commands in children forked from a warm server that imported the heavy modules once.

A `WarmWorker` starts `prtoggle.runners.warm_server` on its first warm run. A command of the
form `python -m MODULE ...`, `python SCRIPT ...` or `python -c CODE ...` (this
interpreter, no interpreter options) whose environment differs from the worker's only in
the run-time variables (`warm_eligibility` says which commands qualify) runs in a child
forked from the server: a new session, the run's env, cwd, argv, stdio and fresh signal
dispositions, detection state reset, reverts applied after the fork. Any other command
runs as a plain child (`run_child`). A warm run whose program sets a variable the preload
may have read at import (a conftest.py's TRITON_INTERPRET=1: `warm_environ`) is killed;
the worker is built again with that value in its environment, so that its preload sees
what the program's own imports would, and the run is made again there; later runs of
the command that set it the same way stay warm. A run that ends without setting it (a
probe whose revert breaks an import fails before it sets anything) is made again on the
server built before the first adoption, kept for that (with more variables adopted: as a
plain child), the worker kept for the runs after it. Where that cannot hold (a run sets it to
another value, MAX_UNSET runs end without setting it, or MAX_REBUILDS is spent) the run is
made again as a plain child and the worker steps aside: one short line, and every later
run is a plain child. Either way the answer is a CommandRun with the child's output and exit
status, as a fresh process would give it. `widen(names)` starts the server again with more
modules preloaded (`bisect --git` after a first run that imported much the preload had
not); a wider preload that initialises CUDA gives way to the narrower one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from prtoggle.errors import RunnerError
from prtoggle.protocol import TRACE_FROM_HERE
from prtoggle.runners.child_process import (
    CommandRun,
    disown,
    own_group,
    raise_if_interrupted,
    run_child,
)
from prtoggle.runners.output_tail import OutputTail, read_until, run_to_exit
from prtoggle.runners.warm_eligibility import (
    PythonInvocation,
    cold_reason,
    env_without_revert,
    python_invocation,
)
from prtoggle.runners.warm_environ import MAX_UNSET, StaleNotice, no_rebuild_reason
from prtoggle.runners.warm_server import CUDA_INITIALISED_EXIT_CODE

logger = logging.getLogger(__name__)

WARM_ENV = "PRTOGGLE_WARM"
"""`0` (or off/false/no) makes every run a plain child, as `--cold` does."""

HEAVY_MODULES = ("torch", "triton", "prtoggle.revert.toggle", "prtoggle.detect")
"""What a scenario or a check of the fixes' engine imports first: the worker's default preload.

Commands add the modules of the fixes' code (`component:`), never a `-m` target itself: that
runs as `__main__` in the child, and importing it under its own name in the server would
run its module-level code there too."""
_STOP_GRACE_SECONDS = 2.0


class CommandRunner(Protocol):
    """`run_child`'s signature: a plain child, or a WarmWorker's `run`."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cwd: str | None = None,
    ) -> CommandRun: ...


def warm_enabled(*, cold: bool = False) -> bool:
    """False when `--cold` was given or PRTOGGLE_WARM turns the worker off."""
    value = os.environ.get(WARM_ENV, "").strip().lower()
    if value not in ("", "0", "1", "off", "on", "false", "true", "no", "yes"):
        raise RunnerError(
            f"{WARM_ENV}={value!r} is not a boolean: expected 1/on/true/yes or 0/off/false/no"
        )
    return not cold and value not in ("0", "off", "false", "no")


@dataclass
class WarmWorker:
    """Runs commands warm when it can, as plain children otherwise; close() ends everything."""

    preload: tuple[str, ...] = HEAVY_MODULES
    base_env: dict[str, str] = field(default_factory=lambda: env_without_revert(os.environ))
    untraced: tuple[str, ...] = ()
    """Modules the server imports first, outside the trace PRTOGGLE_TRACE_DIR asks for
    (`bisect --git`: libraries whose code no candidate changes, torch's import alone was
    0.7 s of tracing)."""
    warm_runs: int = field(default=0, init=False)
    cold_runs: int = field(default=0, init=False)
    output_limit: int | None = None
    """None: a run's whole output, read until its pipes close. N: `output_tail.run_to_exit`'s
    way (a run ends when its own process exits; the last N bytes of each stream kept)."""
    stepped_aside: str | None = field(default=None, init=False)
    """Why every run is a plain child now (a run changed a variable the preload read)."""
    adopted: dict[str, str | None] = field(default_factory=dict, init=False)
    """Variables the worker was built again with, as a run set them (None: deleted)."""
    rebuilds: int = field(default=0, init=False)
    unset_runs: int = field(default=0, init=False)
    """Runs made again as plain children because they did not set an adopted variable."""
    base_runs: int = field(default=0, init=False)
    """Runs made again, warm, on the server built before the first adopted variable."""
    prepared: tuple[str, ...] = field(default=(), init=False)
    """Source files each server reads ahead (prepare_sources), for the runs' reverts."""
    _server: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _retired: list[tuple[subprocess.Popen[bytes], socket.socket]] = field(
        default_factory=list, init=False, repr=False
    )
    _requests: socket.socket | None = field(default=None, init=False, repr=False)
    _base: tuple[subprocess.Popen[bytes], socket.socket] | None = field(
        default=None, init=False, repr=False
    )
    """The server built with nothing adopted, kept (in `_retired` too) after the first
    rebuild: a run that does not set the adopted variable runs there again."""
    _narrower: tuple[tuple[str, ...], dict[str, str]] | None = field(
        default=None, init=False, repr=False
    )
    """The preload and environment before widen(), until a run on the wider one answers."""
    _widenings: int = field(default=0, init=False, repr=False)
    """How many times widen() added modules: a run handed over before the last one cannot
    vouch for the widened preload."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _live: set[int] = field(default_factory=set, init=False, repr=False)
    _killed: set[int] = field(default_factory=set, init=False, repr=False)
    """Runs `close` killed: a server stopped before it reported one's status ends it so."""

    def __enter__(self) -> WarmWorker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cwd: str | None = None,
    ) -> CommandRun:
        """Run `argv` to completion like `run_child`: warm if it can, else a plain child."""
        run_env = dict(os.environ if env is None else env)
        invocation = python_invocation(argv, path=run_env.get("PATH"))
        reason = self.cold_reason(argv, run_env, cwd=cwd)
        with self._lock:
            if invocation is None or reason is not None:
                self.cold_runs += 1
            else:
                self.warm_runs += 1
        if invocation is None or reason is not None:
            logger.debug("plain child for %s: %s", argv[:3], reason)
            return self._run_plain(argv, env=run_env, timeout=timeout, cwd=cwd)
        widened = self._widenings
        try:
            done = self._run_warm(argv, invocation, run_env, timeout, cwd or os.getcwd())
        except RunnerError:
            if not self._narrow_back():
                raise
            done = self._run_warm(argv, invocation, run_env, timeout, cwd or os.getcwd())
        if widened == self._widenings:
            self._narrower = None  # a server that imported the widened preload answered
        while isinstance(done, StaleNotice):
            if self._base_serves(done):  # as a fresh process would: nothing adopted
                done = self._run_warm(
                    argv, invocation, run_env, timeout, cwd or os.getcwd(), on_base=True
                )
                break
            if not self._rebuild_for(done):
                break
            done = self._run_warm(argv, invocation, run_env, timeout, cwd or os.getcwd())
        if isinstance(done, CommandRun):
            return done
        with self._lock:
            self.cold_runs += 1
        return self._run_plain(argv, env=run_env, timeout=timeout, cwd=cwd)

    def start(self) -> None:
        """Start the server now (it imports the preload while the caller does other work)
        rather than at the first warm run."""
        with self._lock:
            if self.stepped_aside is None:
                self._ensure_server()

    def widen(self, names: Sequence[str], *, base_env: Mapping[str, str] | None = None) -> int:
        """Preload `names` too (how many were not yet preloaded). A running server imports
        them in place, before the next run it forks (it does not import again what it has);
        otherwise the server started next imports them with the rest. `base_env`: the
        environment of servers started from now on (default: as it is). Should the server
        stop because a module it imports initialised CUDA (the runs it forked before are
        killed with it), the next run goes back to the preload before (a server started
        again) and says so in one line."""
        with self._lock:
            known = {*self.preload, *self.untraced}
            new = tuple(dict.fromkeys(n for n in names if n not in known))
            if self.stepped_aside is not None or not new:
                return 0
            self._narrower = (self.preload, dict(self.base_env))
            self._widenings += 1
            self.preload = (*self.preload, *new)
            if base_env is not None:
                self.base_env = dict(base_env)
            if self._requests is not None:
                _send_in_place(self._requests, {"import": list(new)})
        return len(new)

    def prepare_sources(self, files: Sequence[str]) -> None:
        """Have the server read, parse and compile `files` (source files of modules it
        preloaded) before its next fork, as a revert of their functions would; so does
        every server started later. Runs that revert none of them lose nothing but the
        server's time; a server that cannot be told is left as it is (its runs read
        the files themselves)."""
        with self._lock:
            new = tuple(f for f in dict.fromkeys(files) if f not in self.prepared)
            if not new:
                return
            self.prepared = (*self.prepared, *new)
            if self._requests is not None:
                _send_in_place(self._requests, {"prepare": list(new)})

    def server_env(self) -> dict[str, str]:
        """The environment the server starts with: base_env and the adopted variables."""
        env = dict(self.base_env)
        for name, value in self.adopted.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def _run_plain(
        self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float | None, cwd: str | None
    ) -> CommandRun:
        if self.output_limit is None:
            return run_child(argv, env=env, timeout=timeout, cwd=cwd)
        return run_to_exit(argv, env=env, timeout=timeout, cwd=cwd, limit=self.output_limit)

    def cold_reason(
        self, argv: Sequence[str], env: Mapping[str, str], *, cwd: str | None = None
    ) -> str | None:
        """Why `argv` with `env` must run as a plain child; None when it can run warm."""
        if self.stepped_aside is not None:
            return self.stepped_aside
        return cold_reason(argv, env, base_env=self.base_env, cwd=cwd)

    def close(self) -> None:
        """Kill every live run's group, stop the server and wait for it."""
        with self._lock:
            for pid in list(self._live):
                self._killed.add(pid)
                _kill_group(pid)
            servers = [*self._retired]
            self._retired = []
            if self._server is not None and self._requests is not None:
                servers.append((self._server, self._requests))
            self._server, self._requests = None, None
        for _server, requests in servers:
            requests.close()
        for server, _requests in servers:
            _stop_server(server)

    @property
    def server_pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    def _ensure_server(self) -> socket.socket:
        if self._requests is not None:
            return self._requests
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [
            sys.executable,
            "-m",
            "prtoggle.runners.warm_server",
            str(theirs.fileno()),
            *([*self.untraced, TRACE_FROM_HERE] if self.untraced else []),
            *self.preload,
        ]
        try:
            self._server = subprocess.Popen(
                argv,
                env=self.server_env(),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            theirs.close()
        server = self._server
        own_group(server.pid, has_exited=lambda: server.poll() is not None)
        self._requests = mine
        if self.prepared:
            _send_in_place(mine, {"prepare": list(self.prepared)})
        return mine

    def _run_warm(
        self,
        argv: Sequence[str],
        invocation: PythonInvocation,
        env: dict[str, str],
        timeout: float | None,
        cwd: str,
        *,
        on_base: bool = False,
    ) -> CommandRun | StaleNotice:
        """The run forked warm (`on_base`: from the server built with nothing adopted); or,
        when it changed a variable the preload may have read (it is then killed) or did not
        set one the worker was built with, that notice."""
        raise_if_interrupted()
        reply, out_read, err_read = self._send_request(invocation, env, cwd, on_base=on_base)
        pid: int | None = None
        notices: list[StaleNotice] = []
        try:
            pid = int(self._message(reply, "pid", notices))
            started = time.monotonic()  # the run's own time: the server's start-up is not in it
            with self._lock:
                self._live.add(pid)
            own_group(pid, has_exited=_read_from_proc)
            raise_if_interrupted()
            deadline = None if timeout is None else started + timeout
            if self.output_limit is None:
                stdout, stderr, timed_out = _drain(out_read, err_read, pid=pid, deadline=deadline)
            else:
                stdout, stderr, timed_out = _tail_to_exit(
                    out_read, err_read, pid=pid, deadline=deadline, limit=self.output_limit
                )
            status = self._status(reply, notices, pid=pid)
            raise_if_interrupted()
        except BaseException:
            if pid is not None:
                _kill_group(pid)
            raise
        finally:
            if pid is not None:
                disown(pid)
                with self._lock:
                    self._live.discard(pid)
                    self._killed.discard(pid)
            reply.close()
            os.close(out_read)
            os.close(err_read)
        if notices:
            return notices[0]
        return CommandRun(
            argv=tuple(argv),
            returncode=None if timed_out else os.waitstatus_to_exitcode(status),
            seconds=time.monotonic() - started,
            stdout=stdout,
            stderr=stderr,
            timeout=timeout,
        )

    def _send_request(
        self, invocation: PythonInvocation, env: dict[str, str], cwd: str, *, on_base: bool
    ) -> tuple[socket.socket, int, int]:
        """Hand the server the run and its descriptors; ours: reply socket, stdout, stderr."""
        reply, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        request = {
            "form": invocation.form,
            "target": invocation.target,
            "args": list(invocation.args),
            "env": env,
            "cwd": cwd,
            "expect": {} if on_base else dict(self.adopted),
        }
        try:
            with self._lock:
                requests = self._base[1] if on_base and self._base else self._ensure_server()
                descriptors = [theirs.fileno(), stdin, out_write, err_write]
                socket.send_fds(requests, [json.dumps(request).encode()], descriptors)
        except OSError as exc:
            reply.close()
            os.close(out_read)
            os.close(err_read)
            raise RunnerError(
                f"cannot hand a run to the warm worker (pid {self.server_pid}): {exc}; "
                f"rerun with --cold or {WARM_ENV}=0"
            ) from exc
        finally:
            for fd in (stdin, out_write, err_write):
                os.close(fd)
            theirs.close()
        return reply, out_read, err_read

    def _retire_server(self, *, stop: bool = True) -> None:
        """Runs fork from the next server; this one is reaped at close(). `stop`: close its
        request socket now (it ends); else it stays up (the base server of `_base`)."""
        if self._server is not None and self._requests is not None:
            if stop:
                self._requests.close()
            self._retired.append((self._server, self._requests))
        self._server, self._requests = None, None

    def _narrow_back(self) -> bool:
        """After widen(): when the widened server stopped for CUDA, the preload before."""
        with self._lock:
            server = self._server
            if self._narrower is None or server is None:
                return False
            if server.poll() != CUDA_INITIALISED_EXIT_CODE:
                return False
            self.preload, self.base_env = self._narrower
            self._narrower = None
            self._retire_server()
        logger.warning(
            "prtoggle: a module the warm worker was asked to preload too initialised CUDA; "
            "runs fork from the narrower preload"
        )
        return True

    def _base_serves(self, notice: StaleNotice) -> bool:
        """A run that did not set the one variable the worker was built with runs again on
        the server built before it (kept for that), warm."""
        with self._lock:
            serves = (
                notice.unset
                and self._base is not None
                and self._base[0].poll() is None
                and self.stepped_aside is None
                and set(self.adopted) == {notice.name}
            )
            if serves:
                self.base_runs += 1
        return serves

    def _rebuild_for(self, notice: StaleNotice) -> bool:
        """Build the worker again with `notice`'s variable as the run set it; False (and the
        worker steps aside) where a rebuilt worker could not give a fresh process's answer."""
        with self._lock:
            adopted = notice.name in self.adopted and self.adopted[notice.name] == notice.value
            raced = adopted and not notice.unset
            if raced and self.stepped_aside is None:
                return True  # a run on the worker before this value: again, on the new one
            if notice.unset and self.stepped_aside is None and self.unset_runs + 1 < MAX_UNSET:
                self.unset_runs += 1  # this run again as a plain child; the worker stays
                logger.debug("a run did not set %s: made again as a plain child", notice.name)
                return False
            reason = no_rebuild_reason(notice, self.adopted, self.rebuilds)
            if reason is None and self.stepped_aside is None:
                if not self.adopted and self._server is not None and self._requests is not None:
                    self._base = (self._server, self._requests)
                self.adopted[notice.name] = notice.value
                self.rebuilds += 1
                self._retire_server(stop=False)
                logger.debug("warm worker built again with %s=%r", notice.name, notice.value)
                return True
            first = self.stepped_aside is None
            self.stepped_aside = self.stepped_aside or reason
        if first:
            logger.warning("prtoggle: no warm worker from here: %s", self.stepped_aside)
        return False

    def _status(self, reply: socket.socket, notices: list[StaleNotice], *, pid: int) -> int:
        """The run's exit status, as the server reports it; -SIGKILL for a run `close`
        killed whose server stopped before it could report."""
        try:
            return int(self._message(reply, "status", notices))
        except RunnerError:
            with self._lock:
                if pid in self._killed:
                    return -signal.SIGKILL
            raise

    def _message(self, reply: socket.socket, key: str, notices: list[StaleNotice]) -> int:
        """The server's message `key`; a run's `stale_env` notices met on the way are kept."""
        while data := reply.recv(4096):
            message = json.loads(data)
            if "stale_env" in message:
                value = message.get("value")
                notices.append(
                    StaleNotice(
                        name=str(message["stale_env"]),
                        value=None if value is None else str(value),
                        unset=bool(message.get("unset", False)),
                    )
                )
                continue
            return int(message[key])
        code = self._server.wait(timeout=_STOP_GRACE_SECONDS) if self._server else None
        why = f"its exit status: {code}"
        if code == CUDA_INITIALISED_EXIT_CODE:
            why = (
                f"one of the modules it preloads ({', '.join(self.preload)}) initialised "
                "CUDA, which a forked child cannot use"
            )
        raise RunnerError(
            f"the warm worker (pid {self.server_pid}) ended before reporting the run's "
            f"{key} ({why}); rerun with --cold or {WARM_ENV}=0"
        )


@contextlib.contextmanager
def command_runner(
    *, warm: bool, preload: Sequence[str] = HEAVY_MODULES, output_limit: int | None = None
) -> Iterator[CommandRunner]:
    """A WarmWorker's `run` (the worker closed on exit) when `warm`, else `run_child`.

    `output_limit`: runs end when their own process exits and keep that many bytes of
    each stream (`output_tail.run_to_exit`), warm or not.
    """
    if not warm:
        yield run_child if output_limit is None else partial(run_to_exit, limit=output_limit)
        return
    worker = WarmWorker(preload=tuple(dict.fromkeys(preload)), output_limit=output_limit)
    try:
        yield worker.run
    finally:
        worker.close()


def _send_in_place(requests: socket.socket, request: Mapping[str, list[str]]) -> None:
    """A request the server does itself, answering nothing (warm_server's docstring)."""
    with contextlib.suppress(OSError):  # the server is gone: the next run says so
        requests.send(json.dumps(request).encode())


def _stop_server(server: subprocess.Popen[bytes]) -> None:
    """Wait for a server whose request socket is closed; kill its group past the grace."""
    try:
        server.wait(timeout=_STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_group(server.pid)
        server.wait()
    finally:
        disown(server.pid)


def _drain(out_fd: int, err_fd: int, *, pid: int, deadline: float | None) -> tuple[str, str, bool]:
    """Read both pipes to EOF; past `deadline`, kill the run's group and keep reading."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            wait = None if deadline is None or timed_out else max(0.0, deadline - time.monotonic())
            events = selector.select(wait)
            if not events and not timed_out:
                _kill_group(pid)
                timed_out = True
            for key, _mask in events:
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    stdout, stderr = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_fd, err_fd))
    return stdout, stderr, timed_out


def _tail_to_exit(
    out_fd: int, err_fd: int, *, pid: int, deadline: float | None, limit: int
) -> tuple[str, str, bool]:
    """Read both pipes' tails until the run's process exits (past `deadline`: timed out),
    then end what it left behind in its group."""
    out, err = OutputTail(limit), OutputTail(limit)
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already: an fd readable at once says "exited"
        pidfd, write_end = os.pipe()
        os.close(write_end)
    try:
        exited = read_until({out_fd: out, err_fd: err}, exit_fd=pidfd, deadline=deadline)
    finally:
        os.close(pidfd)
        _kill_group(pid)
    return out.text(), err.text(), not exited


def _read_from_proc() -> bool:
    """`own_group`'s has_exited for a run: not our child, so its liveness is read from /proc."""
    return True


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

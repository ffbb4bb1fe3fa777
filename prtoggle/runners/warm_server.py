"""The warm worker's server: imports heavy modules once, then forks one child per run.

Started by `prtoggle.runners.warm_client.WarmWorker` as `python -m
prtoggle.runners.warm_server FD [MODULE...]` with FD one end of a SOCK_SEQPACKET socket
pair. The server is single-threaded: it imports MODULE... (warm_preload.py: a module that
fails to import is left for the child to import), freezes what the imports made (gc.freeze:
a run's collections skip it), records the signal dispositions a fresh interpreter has, then
waits. Each request carries a JSON description of the run and four descriptors (the reply
socket, stdin, stdout, stderr). The server forks; the child becomes a fresh-looking process
(see `_become_fresh`) and runs the program; the server replies `{"pid": N}`, then
`{"status": S}` (a wait status) when the child ends; before it, the child itself may send
`{"stale_env": NAME, "value": VALUE}` and kill its group when its program changes a variable
the preload may have read (`warm_environ`), or `{"stale_env": NAME, "value": VALUE, "unset":
true}` at its end when it did not set a variable of the request's `expect` (the values the
worker was built with) that way. Two requests, with no descriptors, the server does itself
and answers nothing: `{"import": [MODULE...]}` preloads more modules in place (the preload's
rules), `{"prepare": [FILE...]}` reads those source files ahead for the runs' reverts
(patching/prepared_sources.py). A reply socket that closes early, or the request socket
closing, kills the run's process group (the server then ends at once, its modules not torn
down). The server never initialises CUDA and never reverts a fix itself.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, NoReturn

from prtoggle.protocol import REVERT_ENV
from prtoggle.runners.warm_environ import (
    expect_run,
    record_preload_reads,
    stop_recording,
    unset_expected,
    watch_run,
)
from prtoggle.runners.warm_preload import (
    collections_off,
    cuda_initialised,
    freeze_preloaded_heap,
    import_more,
    maybe_start_trace,
    preload,
    split_at_trace_mark,
)

MAX_REQUEST_BYTES = 1 << 20
CUDA_INITIALISED_EXIT_CODE = 3
"""The server's status when a preloaded module initialised CUDA (it then serves nothing)."""
_PR_SET_PDEATHSIG = 1
_THIS_FILE = (lambda: None).__code__.co_filename


@dataclass(frozen=True)
class RunRequest:
    """One run as the client describes it: how to start Python's main, env, cwd, paths."""

    form: str  # "module" | "script" | "code"
    target: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    expect: dict[str, str | None]

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RunRequest:
        """The run a request's decoded JSON describes."""
        return cls(
            form=data["form"],
            target=data["target"],
            args=tuple(data["args"]),
            env=dict(data["env"]),
            cwd=data["cwd"],
            expect=dict(data.get("expect", {})),
        )


@dataclass
class _Served:
    """In a forked child: the reply socket of its run (its notices to the client)."""

    reply: socket.socket | None = None


_SERVED = _Served()


@dataclass
class _Server:
    """The server's state: the request socket, live children and what a child must undo."""

    requests: socket.socket
    fresh_signals: dict[int, Any]
    base_path: list[str]
    preloaded: list[str] = field(default_factory=list)
    children: dict[int, tuple[int, socket.socket]] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)
    """The server's own pid: a child forked a moment ago shares this state (and, until it
    resets its signals, the SIGTERM handler) but is not the server."""


def main(argv: list[str] | None = None) -> None:
    """Serve requests until the request socket closes; in a forked child, run its program."""
    args = sys.argv[1:] if argv is None else argv
    requests = socket.socket(fileno=int(args[0]))
    fresh_signals = _current_dispositions()
    _die_with_parent()
    base_path = _path_without_python_path(list(sys.path))
    sys.argv = [""]  # what a preloaded module sees; each run gets its own argv
    collections_off()
    record_preload_reads()
    untraced, traced = split_at_trace_mark(args[1:])
    for name in untraced:
        preload(name)
    stop_trace = maybe_start_trace(preloading=True)
    for name in traced:
        preload(name)
    stop_trace()
    preloaded = [*untraced, *traced]
    stop_recording(preloaded)
    _refuse_initialised_cuda()
    freeze_preloaded_heap()
    server = _Server(
        requests=requests, fresh_signals=fresh_signals, base_path=base_path, preloaded=preloaded
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _number, _frame: _stop(server))
    request = _serve(server)
    if request is None:
        _end_server()
    status = _run_as_main(request)
    _report_unset_expected(request)
    _exit_like_python(status)


def _run_as_main(request: RunRequest) -> int:
    """Run the program; its exit status as the interpreter would compute it (-2: SIGINT)."""
    try:
        _run_program(request)
    except SystemExit as exc:
        return _system_exit_code(exc)
    except BaseException as exc:
        trimmed = _program_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(trimmed), trimmed)
        return -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _exit_like_python(code: int) -> None:
    """What interpreter exit does that a program can see, without tearing modules down.

    Non-daemon threads are joined, atexit handlers run, stdio is flushed; then the process
    ends with `code` (an uncaught KeyboardInterrupt ends it by SIGINT, as CPython does).
    Module teardown is skipped: that is what makes a warm run's exit cheap.
    """
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    _flush_stdio()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _system_exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{exc.code}\n")
    return 1


def _program_frames(traceback: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without this module's own frames at its head."""
    while traceback is not None and traceback.tb_frame.f_code.co_filename == _THIS_FILE:
        traceback = traceback.tb_next
    return traceback


def _serve(server: _Server) -> RunRequest | None:
    """The select loop; returns a request only in a freshly forked child."""
    while True:
        by_pidfd = {pidfd: pid for pid, (pidfd, _reply) in server.children.items()}
        by_reply = {reply.fileno(): pid for pid, (_pidfd, reply) in server.children.items()}
        waited: list[Any] = [server.requests, *by_pidfd, *by_reply]
        readable, _, _ = select.select(waited, [], [])
        for ready in readable:
            if ready is server.requests:
                try:
                    payload, fds, _flags, _addr = socket.recv_fds(
                        server.requests, MAX_REQUEST_BYTES, 4
                    )
                except ConnectionResetError:
                    payload, fds = b"", []
                if not payload:
                    _kill_all(server)
                    return None
                data = json.loads(payload)
                if _served_in_place(server, data, fds):
                    continue
                request = RunRequest.from_data(data)
                if _fork_run(server, request, fds):
                    return request
            elif ready in by_pidfd:
                _reap(server, by_pidfd[ready])
            elif ready in by_reply and by_reply[ready] in server.children:
                _abandon(server, by_reply[ready])


def _served_in_place(server: _Server, data: dict[str, Any], fds: list[int]) -> bool:
    """A request the server does itself, so that every run forked later finds it done;
    False for a run. `{"import": [module, ...]}`: preload these too (the preload's rules:
    variables read are noted, CUDA initialised ends the server, the heap is frozen again).
    `{"prepare": [file, ...]}`: read those source files ahead (patching/prepared_sources.py;
    a failure leaves the runs to read them)."""
    if "import" not in data and "prepare" not in data:
        return False
    for fd in fds:
        os.close(fd)
    if "import" in data:
        import_more([str(name) for name in data["import"]], preloaded=server.preloaded)
        _refuse_initialised_cuda(server)
    else:
        from prtoggle.patching.prepared_sources import prepare_sources

        with contextlib.suppress(Exception):
            prepare_sources(str(name) for name in data["prepare"])
    return True


def _fork_run(server: _Server, request: RunRequest, fds: list[int]) -> bool:
    """Fork the run; True in the child (already made fresh), False in the server."""
    reply = socket.socket(fileno=fds[0])
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become_fresh(server, request, reply, fds[1:])
        return True
    for fd in fds[1:]:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    server.children[pid] = (pidfd, reply)
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"pid": pid}).encode())
    return False


def _reap(server: _Server, pid: int) -> None:
    pidfd, reply = server.children.pop(pid)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"status": status}).encode())
    reply.close()


def _abandon(server: _Server, pid: int) -> None:
    """The client closed the reply socket before the run ended: kill the run's group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill_all(server: _Server) -> None:
    for pid in list(server.children):
        _abandon(server, pid)
        _reap(server, pid)


def _stop(server: _Server) -> None:
    """SIGTERM (or the client's death): kill every run's group, then exit. A child forked
    a moment ago that gets it before it has reset its signals only exits (the runs are
    the server's children, not its)."""
    if os.getpid() == server.pid:
        _kill_all(server)
    os._exit(128 + signal.SIGTERM)


def _become_fresh(
    server: _Server, request: RunRequest, reply: socket.socket, stdio: list[int]
) -> None:
    """In the child: a new session, the run's stdio, signals, env, cwd, paths, state, reverts."""
    os.setsid()
    for target_fd, fd in enumerate(stdio):
        os.dup2(fd, target_fd)
        os.close(fd)
    server.requests.close()
    for pidfd, other_reply in server.children.values():
        os.close(pidfd)
        other_reply.close()
    _die_with_parent(enabled=False)
    for number, disposition in server.fresh_signals.items():
        with contextlib.suppress(OSError, ValueError):
            signal.signal(number, disposition)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.cwd)
    first = os.path.dirname(os.path.abspath(request.target)) if request.form == "script" else ""
    if request.form == "module":
        first = request.cwd
    python_path = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *python_path, *server.base_path[1:]]
    _reset_detection_state()
    maybe_start_trace()
    _maybe_apply_reverts()
    os.set_inheritable(reply.fileno(), False)  # the run's notices; not its programs'
    _SERVED.reply = reply
    expect_run(request.expect)
    watch_run(lambda name, value: _stop_stale(reply, name, value))


def _stop_stale(reply: socket.socket, name: str, value: str | None) -> None:
    """The program changed a variable the preload may have read: tell the client, end the run."""
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"stale_env": name, "value": value}).encode())
    os.killpg(os.getpid(), signal.SIGKILL)


def _report_unset_expected(request: RunRequest) -> None:
    """A run that did not set a variable as the worker's preload saw it: tell the client
    (it runs the command again as a fresh process)."""
    unset = unset_expected()
    if unset and _SERVED.reply is not None:
        name = unset[0]
        notice = {"stale_env": name, "value": request.expect[name], "unset": True}
        with contextlib.suppress(OSError):
            _SERVED.reply.send(json.dumps(notice).encode())


def _run_program(request: RunRequest) -> None:
    """Run the program as `python -m`, `python script` or `python -c` would, as __main__."""
    main_module = types.ModuleType("__main__")
    namespace = main_module.__dict__
    namespace["__builtins__"] = sys.modules["builtins"]
    sys.modules["__main__"] = main_module
    if request.form == "module":
        sys.argv = [request.target, *request.args]
        runpy._run_module_as_main(request.target, alter_argv=True)  # type: ignore[attr-defined]
        return
    if request.form == "script":
        sys.argv = [request.target, *request.args]
        namespace.update(__file__=request.target, __cached__=None)
        with open(request.target, "rb") as source:
            code = compile(source.read(), request.target, "exec")
    else:
        sys.argv = ["-c", *request.args]
        code = compile(request.target, "<string>", "exec")
    exec(code, namespace)  # the program the user asked to run


def _reset_detection_state() -> None:
    """Witness rows, redzones, phase/step and set_mode() as a fresh process has them."""
    if "prtoggle.detect" in sys.modules:  # else there is nothing to reset (nor to import)
        from prtoggle.detect.findings.checking import reset_process_state

        reset_process_state()


def _maybe_apply_reverts() -> None:
    """Revert what SGLANG_DEBUG_REVERT_PR names, as the start-up hook of a fresh child does.

    A revert a preloaded module left in force is restored first: a run starts unreverted.
    """
    toggle = sys.modules.get("prtoggle.revert.toggle")
    if toggle is not None:
        for pr in toggle.active_reverts():
            toggle.restore(pr)
    if not os.environ.get(REVERT_ENV, "").strip():
        return
    from prtoggle.recipes.registry import clear_registry_cache
    from prtoggle.revert import child

    clear_registry_cache()
    child.start()  # as the start-up hook of a fresh child does


def _end_server() -> NoReturn:
    """The request socket closed: every run is reaped. The server owes no output, so it
    ends without tearing the preloaded modules down (a second or more with torch loaded,
    which the client would wait for)."""
    _flush_stdio()
    os._exit(0)


def _flush_stdio() -> None:
    """Flush what the process wrote to stdout and stderr (a closed stream is let be)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _refuse_initialised_cuda(server: _Server | None = None) -> None:
    """Each child must create its own CUDA context: one made here cannot cross a fork. The
    server ends (after killing the runs of `server`, when it serves already)."""
    if cuda_initialised():
        if server is not None:
            _kill_all(server)
        os._exit(CUDA_INITIALISED_EXIT_CODE)


def _current_dispositions() -> dict[int, Any]:
    dispositions = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handler = signal.getsignal(number)
            if handler is not None:
                dispositions[int(number)] = handler
    return dispositions


def _path_without_python_path(path: list[str]) -> list[str]:
    """sys.path with the PYTHONPATH entries taken out (index 0 kept as a placeholder)."""
    python_path = {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    resolved = {os.path.abspath(p) for p in python_path}
    return [path[0], *(p for p in path[1:] if p and os.path.abspath(p) not in resolved)]


def _die_with_parent(*, enabled: bool = True) -> None:
    """Linux: get SIGTERM when the client dies (never orphan the children)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM if enabled else 0, 0, 0, 0)


if __name__ == "__main__":
    main()

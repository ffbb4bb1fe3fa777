"""Candidates and ground truth of bench/fix_tests_devset.py: fix commits, trees, test runs."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

FIX_SUBJECT = re.compile(r"\bfix(es|ed|ing)?\b|\[bugfix\]|\bbug", re.IGNORECASE)
PR_OF_SUBJECT = re.compile(r"\(#(\d+)\)")
_TRAILER = re.compile(r"^\S.*:\d+: ((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)$")
_RAISED = re.compile(
    r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Failed)):"
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the history, the cache and the test interpreter are, and how tests run."""

    repo: Path
    cache: Path
    python: str
    package: str
    source_root: str
    tests_dir: str
    runs: int
    timeout: float
    prtoggle_path: Path
    extra_path: tuple[Path, ...] = ()


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A fix commit that changes the package and a test: its tests are the files it changed."""

    sha: str
    subject: str
    pr: int | None
    tests: tuple[str, ...]


@dataclasses.dataclass
class Outcome:
    """One test's result in one run: passed, failed or skipped, and the failure's exception."""

    outcome: str
    exc_type: str = ""
    message: str = ""
    aliases: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Truth:
    """Whether a candidate is kept, its guards and each guard's pre-fix failure."""

    sha: str
    subject: str
    pr: int | None
    kept: bool
    reason: str
    guards: list[str]
    signature: dict[str, list[str]]


def find_candidates(settings: Settings, rev_range: str) -> list[Candidate]:
    """First-parent fix commits of `rev_range` that change the package's `.py` and a test."""
    log = _git(settings.repo, "log", "--first-parent", "--reverse", "--format=%H%x09%s", rev_range)
    found = []
    for line in log.splitlines():
        sha, _, subject = line.partition("\t")
        if not FIX_SUBJECT.search(subject):
            continue
        candidate = _candidate(settings, sha, subject)
        if candidate is not None:
            found.append(candidate)
    return found


def ground_truth(settings: Settings, cand: Candidate, *, cached_only: bool) -> Truth | None:
    """The candidate's truth, from the cache or by running its tests on both sides."""
    path = settings.cache / "truth" / f"{cand.sha}.json"
    if path.exists():
        return Truth(**json.loads(path.read_text()))
    if cached_only:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    claim = path.with_suffix(".running")
    try:
        claim.touch(exist_ok=False)  # another worker on the same cache has it
    except FileExistsError:
        return None
    try:
        truth = _run_truth(settings, cand)
        path.write_text(json.dumps(dataclasses.asdict(truth), indent=1))
    finally:
        claim.unlink()
    return truth


def post_tree(settings: Settings, sha: str) -> Path:
    """The commit's source root and tests, extracted once under the cache."""
    return _tree(settings, sha, code_rev=sha, tests_rev=sha, name=sha)


def run_pytest(
    settings: Settings, tree: Path, tests: list[str], *, prefix: list[str], env: dict[str, str]
) -> tuple[int, dict[str, Outcome], str]:
    """Run `tests` (paths or node ids relative to the tree) in the tree, `prefix` before
    `python -m pytest`: exit status, each test's outcome by node id, and stderr's tail."""
    with tempfile.TemporaryDirectory(prefix="devset-junit-") as scratch:
        xml = Path(scratch) / "junit.xml"
        argv = [*prefix, settings.python, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        argv += ["-o", "junit_family=xunit1", f"--junitxml={xml}", "-W", "ignore", *tests]
        with subprocess.Popen(
            argv,
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as child:
            try:
                output, _ = child.communicate(timeout=settings.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
                return 124, {}, f"timed out after {settings.timeout:.0f} s"
        outcomes = _read_junit(xml, settings.tests_dir) if xml.exists() else {}
        return child.returncode, outcomes, output[-4000:]


def test_env(settings: Settings, tree: Path, *, extra: list[Path] = ()) -> dict[str, str]:  # type: ignore[assignment]
    """The environment a test run gets: the tree's source root on PYTHONPATH, after `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRTOGGLE_", "SGLANG_DEBUG"))}
    paths = [*map(str, extra), *map(str, settings.extra_path), str(tree / settings.source_root)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def failed(outcome: Outcome | None) -> bool:
    """A test that ran and failed (or errored, or whose file did not collect)."""
    return outcome is not None and outcome.outcome == "failed"


def _candidate(settings: Settings, sha: str, subject: str) -> Candidate | None:
    changed = _git(settings.repo, "diff-tree", "--no-commit-id", "--name-status", "-r", sha)
    package, tests = False, []
    for row in changed.splitlines():
        status, _, path = row.partition("\t")
        name = PurePosixPath(path)
        if path.startswith(settings.package + "/") and path.endswith(".py"):
            package = True
        in_tests = path.startswith(settings.tests_dir + "/")
        if (
            in_tests
            and status[:1] in "AM"
            and name.name.startswith("test")
            and path.endswith(".py")
        ):
            tests.append(path)
    if not (package and tests):
        return None
    pr = PR_OF_SUBJECT.findall(subject)
    return Candidate(sha, subject, int(pr[-1]) if pr else None, tuple(tests))


def _run_truth(settings: Settings, cand: Candidate) -> Truth:
    post = post_tree(settings, cand.sha)
    pre = _tree(
        settings, cand.sha, code_rev=f"{cand.sha}^", tests_rev=cand.sha, name=f"{cand.sha}-pre"
    )
    tests = [t for t in cand.tests if (post / t).exists()]
    post_runs: list[dict[str, Outcome]] = []
    pre_runs: list[dict[str, Outcome]] = []
    for _ in range(settings.runs):
        code, outcomes, _ = run_pytest(
            settings, post, tests, prefix=[], env=test_env(settings, post)
        )
        post_runs.append(outcomes)
        if not outcomes:
            return _dropped(cand, f"no test ran on the commit (pytest exit {code})", post_runs)
        passing = _always(post_runs, lambda o: o is not None and o.outcome == "passed")
        if not passing:
            return _dropped(cand, "no test passes on the commit", post_runs)
        pre_runs.append(run_pytest(settings, pre, tests, prefix=[], env=test_env(settings, pre))[1])
        guards = [t for t in passing if all(failed(_lookup(run, t)) for run in pre_runs)]
        if not guards:
            return _dropped(
                cand, "every test passing on the commit passes on its parent too", post_runs
            )
    shutil.rmtree(pre, ignore_errors=True)
    signature = {}
    for guard in guards:
        first = _lookup(pre_runs[0], guard)
        signature[guard] = [first.exc_type, first.message] if first else ["", ""]
    return Truth(cand.sha, cand.subject, cand.pr, True, "kept", guards, signature)


def _dropped(cand: Candidate, reason: str, post_runs: list[dict[str, Outcome]]) -> Truth:
    outcomes = sorted({o.outcome for run in post_runs for o in run.values()})
    detail = f"{reason} (post-fix outcomes: {', '.join(outcomes) or 'none collected'})"
    return Truth(cand.sha, cand.subject, cand.pr, False, detail, [], {})


def _always(runs: list[dict[str, Outcome]], test: object) -> list[str]:
    ids = sorted(set.intersection(*(set(run) for run in runs))) if runs else []
    return [i for i in ids if all(test(run.get(i)) for run in runs)]  # type: ignore[operator]


def _lookup(run: dict[str, Outcome], node: str) -> Outcome | None:
    """The test's outcome; its file's collection error when the file did not import."""
    return run.get(node) or run.get(node.split("::", maxsplit=1)[0])


def _read_junit(xml: Path, tests_dir: str) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        node = _node_id(case, tests_dir)
        outcome = Outcome("passed")
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = _failure(child)
            elif child.tag == "skipped" and outcome.outcome == "passed":
                outcome = Outcome("skipped")
        outcomes[node] = outcome
    return outcomes


def _node_id(case: ET.Element, tests_dir: str) -> str:
    """`test/a/test_b.py::Class::name` from xunit1's file, classname and name attributes
    (paths in junit are relative to pytest's rootdir, which may be the tests folder)."""
    file = case.get("file") or ""
    classname, name = case.get("classname") or "", case.get("name") or ""
    path = file if file.startswith(tests_dir + "/") else f"{tests_dir}/{file}"
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    if not classname or not name:
        return path  # a collection error: the whole file
    cls = classname[len(module) + 1 :] if module and classname.startswith(module + ".") else ""
    return "::".join(p for p in (path, cls.replace(".", "::"), name) if p)


def _failure(element: ET.Element) -> Outcome:
    """Exception type and first message line. The type: the first `E   SomeError: message`
    line (the exception as raised), else the traceback's last `file:line: Type` line (a
    plain `assert`); the other reading too, as an alias (a wrapper may show another type).
    The message: the first `E   ` line, less its type."""
    lines = (element.text or "").splitlines()
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    raised = [m.group(1) for line in errors if (m := _RAISED.match(line))]
    trailer = [m.group(1) for line in lines if (m := _TRAILER.match(line))]
    found = [t.rsplit(".", 1)[-1] for t in [*raised[:1], *trailer[-1:]]]
    exc_type = found[0] if found else ""
    message = errors[0] if errors else (element.get("message") or "").partition("\n")[0]
    for name in (*raised[:1], exc_type):
        message = message[len(name) + 1 :].strip() if message.startswith(f"{name}:") else message
    return Outcome("failed", exc_type, message[:200], sorted(set(found) - {exc_type}))


def _tree(settings: Settings, sha: str, *, code_rev: str, tests_rev: str, name: str) -> Path:
    tree = settings.cache / "trees" / name
    if (tree / ".complete").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    _extract(settings.repo, code_rev, settings.source_root, tree)
    _extract(settings.repo, tests_rev, settings.tests_dir, tree)
    (tree / ".complete").write_text(sha)
    return tree


def _extract(repo: Path, rev: str, folder: str, into: Path) -> None:
    with tempfile.TemporaryFile() as archive:
        subprocess.run(
            ["git", "--git-dir", str(_git_dir(repo)), "archive", "--format=tar", rev, folder],
            stdout=archive,
            check=True,
        )
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(into, filter="data")


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def _git(repo: Path, *args: str) -> str:
    argv = ["git", "--git-dir", str(_git_dir(repo)), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

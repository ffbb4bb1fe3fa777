"""Apply and restore look atomic to other threads (issue 32.2): never a half-landed fix.

A real process imports a package of its own and runs 1,000 `reverted()` cycles while
three threads call the reverted function and read the names the recipe defines and
removes in a tight loop: no error, and every answer is the post-fix or the pre-fix one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99410
CORE = """\
    LIMIT = 8192


    def new_helper(x):
        return x * 2


    def compute(x):
        return new_helper(x) + LIMIT
    """
USER = "from atomicpkg.core import LIMIT\n"
RECIPE = f"""\
    pr: {PR}
    title: a helper and a constant, reverted under load
    patches:
      - target: atomicpkg.core.compute
        edits:
          - match: return new_helper(x) + LIMIT
            replacement: return _old_helper(x) + LIMIT
    names:
      - scope: atomicpkg.core
        define: |
          LIMIT = 4096
          def _old_helper(x):
              return x + 3
        remove: [new_helper]
    """
STRESS = """\
    import json, sys, threading, time
    from pathlib import Path
    import atomicpkg.core as core
    import atomicpkg.user as user
    from prtoggle.recipes.registry import load_registry
    from prtoggle.revert import toggle

    POST = (8194, (8192, True, False, 8192))
    PRE = (4100, (4096, False, True, 4096))
    sys.setswitchinterval(0.001)  # threads switch often: many chances to see a half state
    registry = load_registry(dirs=[Path(sys.argv[1])])
    PR = int(sys.argv[2])
    stop = threading.Event()
    seen = {"post": 0, "pre": 0}
    wrong = []

    def state():
        ours, theirs = list(map(dict.copy, (vars(core), vars(user))))
        return (ours["LIMIT"], "new_helper" in ours, "_old_helper" in ours, theirs["LIMIT"])

    def caller():
        while not stop.is_set():
            try:
                answer, names = core.compute(1), state()
            except Exception as exc:
                wrong.append(f"{type(exc).__name__}: {exc}")
                continue
            if answer not in (POST[0], PRE[0]) or names not in (POST[1], PRE[1]):
                wrong.append(f"{answer} {names}")
            else:
                seen["post" if answer == POST[0] else "pre"] += 1

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(1000):
            with toggle.reverted(PR, registry=registry):
                time.sleep(0.0002)  # the reverted program runs a moment
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    print(json.dumps({"wrong": len(wrong), "first": wrong[:3], **seen,
                      "restored": core.compute(1) == POST[0] and state() == POST[1]}))
    """


def test_threads_calling_a_fix_see_only_the_fixed_or_the_reverted_program(tmp_path: Path) -> None:
    package = tmp_path / "atomicpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text(textwrap.dedent(CORE))
    (package / "user.py").write_text(USER)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / f"{PR}.yaml").write_text(textwrap.dedent(RECIPE))
    script = tmp_path / "stress.py"
    script.write_text(textwrap.dedent(STRESS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(WORKTREE)])}
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    done = subprocess.run(
        [sys.executable, str(script), str(recipes), str(PR)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["wrong"], result["first"], result["restored"]) == (0, [], True)
    assert result["post"] > 0 and result["pre"] > 0  # both programs were seen

"""The README's commands, CI script and packaging agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_readme_gives_exactly_a_run_command_and_a_test_command() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("prtoggle repro --all")
    assert "pytest" in commands[1]


def test_ci_script_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci_lines


def test_ci_script_installs_the_cpu_torch_build_before_the_project() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("pip install -q torch==2.13.0") < ci.index("pip install -q -e")


def test_torch_requirement_is_a_range_users_can_satisfy_with_their_own_build() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch_req = next(r for r in project["optional-dependencies"]["detect"] if r.startswith("torch"))
    assert ">=" in torch_req
    assert "==" not in torch_req


def test_plain_install_needs_only_click_pyyaml_and_packaging() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=;\[ ]", requirement)[0] for requirement in project["dependencies"]]
    assert names == ["click", "PyYAML", "packaging"]
    extras = project["optional-dependencies"]
    assert [re.split(r"[<>=;\[ ]", r)[0] for r in extras["detect"]] == ["torch", "triton", "numpy"]
    assert extras["gpu"][0] == "prtoggle[detect]"
    assert extras["test"][0] == "prtoggle[detect]"


def test_the_wheel_ships_the_license_and_the_typing_marker() -> None:
    assert (
        "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()
    )
    assert (ROOT / "prtoggle" / "py.typed").is_file()


def test_every_shipped_fix_yaml_is_named_after_its_pr() -> None:
    assert sorted(p.name for p in (ROOT / "yaml").glob("*.yaml")) == []  # collections only
    names = sorted(p.name for p in (ROOT / "yaml" / "fixes").glob("*.yaml"))
    assert names == ["21649.yaml", "22832.yaml", "24856.yaml", "26521.yaml", "27460.yaml"]
    for path in (ROOT / "yaml").glob("*/*.yaml"):
        assert re.search(rf"^pr: {path.stem}$", path.read_text(), re.MULTILINE)

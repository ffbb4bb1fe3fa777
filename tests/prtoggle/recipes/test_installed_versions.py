"""Tests for recipes.installed_versions: importlib.metadata's answer, without importing it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from prtoggle.recipes.installed_versions import installed_version, name_and_version_headers


def install(directory: Path, folder: str, text: str, *, file: str = "METADATA") -> None:
    dist_info = directory / folder
    dist_info.mkdir(parents=True)
    (dist_info / file).write_text(text)


def metadata(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong description.\n"


def test_every_installed_distribution_has_importlib_metadatas_version() -> None:
    names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()}
    assert len(names) > 10
    for name in [*sorted(names), "prtoggle-not-installed", "PyYAML", "pyyaml", "Click"]:
        try:
            wanted: str | None = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wanted = None
        assert (name, installed_version(name)) == (name, wanted)


def test_a_distribution_installed_while_the_process_runs_is_seen_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("prtoggle-fake-dist") is None
    install(
        tmp_path, "prtoggle_fake_dist-0.5.14.dist-info", metadata("prtoggle-fake-dist", "0.5.14")
    )
    assert installed_version("Prtoggle.Fake-Dist") == "0.5.14"
    (tmp_path / "prtoggle_fake_dist-0.5.14.dist-info" / "METADATA").write_text(
        metadata("prtoggle-fake-dist", "0.5.15")
    )
    assert installed_version("prtoggle-fake-dist") == "0.5.15"


def test_the_first_path_entry_and_the_first_folder_named_after_it_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    install(second, "prtoggle_fake_dist-2.dist-info", metadata("prtoggle-fake-dist", "2"))
    install(first, "prtoggle_fake_dist-1.egg-info", metadata("x", "1"), file="PKG-INFO")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    assert installed_version("prtoggle-fake-dist") == "1"  # named after it: its file decides
    assert importlib.metadata.version("prtoggle-fake-dist") == "1"


@pytest.mark.parametrize(
    "head",
    [
        "Name: a\nVersion: 1\n  .post1",  # a folded value
        "Name: a\nnot a header\nVersion: 1",
        "From someone\nVersion: 1",
        "Name: a\r\nVersion: 1",
    ],
)
def test_a_head_that_is_not_plain_key_value_lines_is_left_to_the_email_parser(
    head: str,
) -> None:
    assert name_and_version_headers(head) is None


def test_plain_headers_read_as_the_email_parser_reads_them() -> None:
    head = "Metadata-Version: 2.1\nname:  \tx-y \nVERSION:1.0\nLicense: a\n    b\nVersion: 2"
    assert name_and_version_headers(head) == {"name": "x-y ", "version": "1.0"}


def test_a_zip_on_the_path_leaves_the_answer_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "dists.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(
            "prtoggle_fake_dist-3.dist-info/METADATA", metadata("prtoggle-fake-dist", "3")
        )
    monkeypatch.syspath_prepend(str(archive))
    asked: list[str] = []
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: asked.append(name) or real(name)
    )
    assert installed_version("prtoggle-fake-dist") == "3"
    assert asked == ["prtoggle-fake-dist"]


def test_a_version_lookup_imports_neither_importlib_metadata_nor_email() -> None:
    code = (
        "import sys\n"
        "from prtoggle.recipes.installed_versions import installed_version\n"
        "assert installed_version('click')\n"
        "print(sorted(m for m in ('importlib.metadata', 'email.parser') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"

"""Tests for recipes.versions: applies_to ranges, a tree's version, the installed version."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from revert_fixtures import write_fix

from prtoggle.errors import VersionRangeError
from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.schema import load_recipe
from prtoggle.recipes.versions import (
    installed_version,
    out_of_range,
    parse_version_range,
    require_installed_in_range,
    tree_version,
)

RANGED_FIX = """\
applies_to: prtoggle-fake-dist>=0.5.11,<0.5.15
patches:
  - target: prtoggle_fake_dist.mod.f
    edits: [{match: a = 1, replacement: a = 2}]
"""


def metadata(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong description.\n"


def write_wheel(path: Path, *, name: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("prtoggle_fake_dist/mod.py", "def f():\n    a = 1\n    return a\n")
        dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
        archive.writestr(f"{dist_info}/METADATA", metadata(name, version))
    return path


def install_fake_distribution(directory: Path, *, version: str) -> None:
    dist_info = directory / f"prtoggle_fake_dist-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(metadata("prtoggle-fake-dist", version))


def test_a_range_names_its_distribution_and_keeps_the_text_as_written() -> None:
    found = parse_version_range(" sglang>=0.5.12,<0.5.14 ")
    assert (found.distribution, found.text) == ("sglang", "sglang>=0.5.12,<0.5.14")
    assert [found.contains(v) for v in ("0.5.11", "0.5.12", "0.5.13.post1", "0.5.14")] == [
        False,
        True,
        True,
        False,
    ]
    assert not found.contains("not-a-version")


NAME_AND_SPECIFIERS_ONLY = "takes a name and version specifiers only (no extras, markers or URL)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ">=0.5",
            "is not a distribution name followed by version specifiers, like "
            "'sglang>=0.5.11,<0.5.15'",
        ),
        ("sglang", "names no versions; give specifiers, like 'sglang>=0.5.11,<0.5.15'"),
        ("sglang[all]>=0.5", NAME_AND_SPECIFIERS_ONLY),
        ("sglang>=0.5; python_version>'3'", NAME_AND_SPECIFIERS_ONLY),
    ],
)
def test_a_malformed_range_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_version_range(text)
    assert str(caught.value) == message


def test_a_wheel_gives_its_version_from_its_dist_info(tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path / "w.whl", name="prtoggle-fake-dist", version="0.5.14")
    tree = open_source_tree(wheel)
    assert tree_version(tree, "prtoggle_fake_dist") == "0.5.14"
    assert tree_version(tree, "other-dist") is None


def test_an_sdist_gives_its_version_from_pkg_info(tmp_path: Path) -> None:
    sdist = tmp_path / "prtoggle_fake_dist-0.5.13.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in [
            ("prtoggle_fake_dist-0.5.13/PKG-INFO", metadata("prtoggle-fake-dist", "0.5.13")),
            ("prtoggle_fake_dist-0.5.13/src/x.egg-info/PKG-INFO", metadata("x", "9")),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    assert tree_version(open_source_tree(sdist), "prtoggle-fake-dist") == "0.5.13"
    assert tree_version(open_source_tree(sdist), "x") is None


def test_a_directory_gives_its_version_from_pyproject_or_dist_info(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    assert tree_version(open_source_tree(checkout), "prtoggle-fake-dist") is None
    (checkout / "pyproject.toml").write_text(
        '[project]\nname = "prtoggle-fake-dist"\nversion = "0.5.12"\n'
    )
    assert tree_version(open_source_tree(checkout), "prtoggle-fake-dist") == "0.5.12"
    dynamic = tmp_path / "dynamic"
    dynamic.mkdir()
    (dynamic / "pyproject.toml").write_text(
        '[project]\nname = "prtoggle-fake-dist"\ndynamic = ["version"]\n'
    )
    assert tree_version(open_source_tree(dynamic), "prtoggle-fake-dist") is None
    site = tmp_path / "site"
    install_fake_distribution(site, version="0.5.11")
    assert tree_version(open_source_tree(site), "prtoggle-fake-dist") == "0.5.11"


def test_out_of_range_names_the_version_where_it_was_found_and_the_range(
    tmp_path: Path,
) -> None:
    fix = load_recipe(write_fix(tmp_path / "pack", 22832, RANGED_FIX))
    old = write_wheel(tmp_path / "old.whl", name="prtoggle-fake-dist", version="0.5.14")
    new = write_wheel(tmp_path / "new.whl", name="prtoggle-fake-dist", version="0.5.23")
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    assert out_of_range(fix, tree=open_source_tree(old)) is None
    assert out_of_range(fix, tree=open_source_tree(unknown)) is None
    assert out_of_range(fix, tree=open_source_tree(new)) == (
        f"prtoggle-fake-dist 0.5.23 (in {new}) is outside the recipe's range "
        "prtoggle-fake-dist>=0.5.11,<0.5.15 (applies_to)"
    )


def test_a_revert_where_the_installed_version_is_outside_the_range_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix = load_recipe(write_fix(tmp_path / "pack", 22832, RANGED_FIX))
    assert installed_version("prtoggle-fake-dist") is None
    require_installed_in_range(fix)  # not installed: the import decides, as for any recipe
    site = tmp_path / "site"
    install_fake_distribution(site, version="0.5.23")
    monkeypatch.syspath_prepend(str(site))
    assert installed_version("prtoggle-fake-dist") == "0.5.23"
    assert out_of_range(fix, tree=None) == (
        "prtoggle-fake-dist 0.5.23 (installed) is outside the recipe's range "
        "prtoggle-fake-dist>=0.5.11,<0.5.15 (applies_to)"
    )
    with pytest.raises(VersionRangeError) as caught:
        require_installed_in_range(fix)
    assert str(caught.value) == (
        f"pack/22832 does not apply to the installed prtoggle-fake-dist 0.5.23: "
        f"{tmp_path / 'pack' / '22832.yaml'} covers prtoggle-fake-dist>=0.5.11,<0.5.15 "
        "(applies_to); use a recipe for 0.5.23 or install a version in that range"
    )


RANGES = [
    f"{op}{bound}"
    for op in ("==", "!=", "<=", ">=", "<", ">")
    for bound in ("0", "0.5", "0.5.0", "0.5.14", "1", "0.05.14")
]
VERSIONS = ["0", "0.5", "0.5.0", "0.5.13", "0.5.14", "0.5.14.0", "0.5.15", "1.0", "10"]
VERSIONS += ["0.5.14.post1", "0.5.13.post2", "0.5.14.0.post0", "0.5.14rc1", "0.5.14+local"]
VERSIONS += ["0.5.14.dev0", "1!0.5", "v0.5.14", "not-a-version"]


@pytest.mark.parametrize("specifiers", [*RANGES, ">=0.5.11, <0.5.15", "!=0.5.14,>0.5"])
def test_a_range_of_plain_releases_answers_as_packaging_does(specifiers: str) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    found = parse_version_range(f"prtoggle-fake-dist {specifiers}")
    assert found.clauses  # read without packaging
    expected = SpecifierSet(specifiers.replace(" ", ""))
    for version in VERSIONS:
        try:
            wanted = expected.contains(Version(version), prereleases=True)
        except InvalidVersion:
            wanted = False
        assert (version, found.contains(version)) == (version, wanted)


@pytest.mark.parametrize(
    "text", ["sglang~=0.5.1", "sglang==0.5.*", "sglang>=0.5rc1", "sglang===0.5", "sglang>=0.5,"]
)
def test_any_other_range_is_packagings_to_read(text: str) -> None:
    found = parse_version_range(text)
    assert found.clauses == ()
    from packaging.requirements import Requirement

    specifier = Requirement(text).specifier
    for version in ["0.5.1", "0.5.3", "0.6", "0.5rc2", "0.5"]:
        assert found.contains(version) == specifier.contains(version, prereleases=True)


def test_a_directory_reads_only_the_dist_info_folders_named_after_the_distribution(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    install_fake_distribution(site, version="0.5.11")
    for index in range(3):
        other = site / f"other_{index}-1.0.dist-info"
        other.mkdir()
        (other / "METADATA").write_text(metadata(f"other-{index}", "1.0"))
    misnamed = site / "zzz-1.0.dist-info"
    misnamed.mkdir()
    (misnamed / "METADATA").write_text(metadata("prtoggle-misnamed", "9.9"))
    tree = open_source_tree(site)
    assert tree_version(tree, "Prtoggle.Fake_Dist") == "0.5.11"
    assert tree_version(tree, "other-1") == "1.0"
    assert tree_version(tree, "missing") is None
    assert tree_version(tree, "prtoggle-misnamed") is None  # its folder is not named so


def test_a_metadata_head_the_line_scan_cannot_read_goes_to_the_email_parser(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    dist_info = site / "prtoggle_fake_dist-1.dist-info"
    dist_info.mkdir(parents=True)
    folded = "Metadata-Version: 2.1\nName: prtoggle-fake-dist\nVersion: 0.5.11\n  .post1\n\nx\n"
    (dist_info / "METADATA").write_text(folded)
    assert tree_version(open_source_tree(site), "prtoggle-fake-dist") == "0.5.11\n  .post1"

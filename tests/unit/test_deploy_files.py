"""The files a Heroku deployment reads agree with pyproject.toml."""

import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.helpers.commands import REPO


def pinned_requirements() -> tuple[dict[str, str], list[str]]:
    """requirements.txt as {name: exact version} plus its other lines, comments dropped."""
    pins: dict[str, str] = {}
    others: list[str] = []
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
        elif line:
            others.append(line)
    return pins, others


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_requirements_pin_every_dependency_within_its_range_then_install_sundial() -> None:
    pins, others = pinned_requirements()
    assert others == ["."]  # Sundial itself, from the checkout being deployed
    for dependency in map(Requirement, project()["dependencies"]):
        name = canonicalize_name(dependency.name)
        assert name in pins, f"{dependency.name} is not pinned in requirements.txt"
        assert pins[name] in dependency.specifier, f"{name}=={pins[name]} outside {dependency}"


def test_python_version_is_one_sundial_supports() -> None:
    version = (REPO / ".python-version").read_text().strip()
    assert SpecifierSet(project()["requires-python"]).contains(f"{version}.0")


def test_every_python_package_of_sundial_ships_in_the_wheel() -> None:
    # setuptools lists packages by hand (assets ride along as `app._assets`): a new
    # subpackage left off the list imports in a checkout and fails in an installed wheel.
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("app", "sundial")
        for init in (REPO / top).rglob("__init__.py")
    }
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"

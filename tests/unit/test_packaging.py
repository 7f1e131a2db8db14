"""The install prints no packaging deprecation warning: the license is an SPDX expression, which setuptools
reads from 77.0 on (a TOML table there is deprecated, and refused from 2027)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_license_is_an_spdx_string_and_the_build_needs_a_setuptools_that_reads_it():
    pyproject = tomllib.loads(PYPROJECT.read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in pyproject["project"].get("classifiers", []))
    setuptools = next(Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools"))
    assert not setuptools.specifier.contains("76.1.0"), "setuptools before 77 reads no SPDX license string"
    assert setuptools.specifier.contains("77.0.0")

"""Fixtures of the dashboard tests: the report fixture of tests/report, saved as runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _report_fixtures() -> ModuleType:
    """tests/report/conftest.py, loaded by path (test folders are not packages)."""
    name = "sim2real_tests_report_fixtures"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parents[1] / "report" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace of two runs: week08 (report + validation) and week03 (report only)."""
    fx = _report_fixtures()
    root = tmp_path_factory.mktemp("workspace")
    fx.build_report().save(root / "week08")
    fx.build_validation().save(root / "week08")
    fx.build_report(seed=1, deployments=3).save(root / "week03")
    return root

"""require_tool: a test that needs an external program (Chromium, LibreOffice) fails under CI
when the program is missing, and is skipped with the package to install elsewhere."""

from __future__ import annotations

import pytest

from tests.conftest import require_tool

MISSING = "no-such-program-gpu-chargeback"


def test_a_missing_tool_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING} is not installed .*'pkg'.*CI"):
        require_tool(MISSING, "pkg")


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_a_missing_tool_is_skipped_outside_ci(monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is not installed .*'pkg'"):
        require_tool(MISSING, "pkg")


def test_a_present_tool_is_its_path(monkeypatch, tmp_path):
    tool = tmp_path / "fake-tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert require_tool("fake-tool", "pkg") == str(tool)

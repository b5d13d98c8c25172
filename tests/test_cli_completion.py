"""``vyre completion SHELL``: the script as a shell runs it. bash really completes with it
(the script sourced, bash's completion variables set as on a Tab, the function called):
sub-commands, options, and file names where a path goes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_env import fresh_env

from vyre_core.cli.app import COMMANDS

SUBCOMMANDS = [name.replace("_", "-") for name in COMMANDS]


def script(shell: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "vyre_core.cli", "completion", shell],
                          cwd=cwd, env=fresh_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("completion")
    path = folder / "vyre.bash"
    path.write_text(script("bash", folder))
    return path


def tab(bash_script: Path, line: str, cwd: Path) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), with the script loaded."""
    words = line.split(" ")
    program = (f"source {bash_script}\n"
               f"COMP_WORDS=({' '.join(repr(w) for w in words)}); "
               f"COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT={len(line)}\n"
               "_shtab_vyre vyre; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "-c", program], cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    return sorted(filter(None, proc.stdout.splitlines()))


def test_bash_completes_sub_commands_options_and_paths(bash_script, tmp_path):
    assert tab(bash_script, "vyre ", tmp_path) == sorted(SUBCOMMANDS)
    assert tab(bash_script, "vyre --", tmp_path) == ["--debug", "--help", "--version"]
    assert tab(bash_script, "vyre ne", tmp_path) == ["new-backend"]
    assert tab(bash_script, "vyre co", tmp_path) == ["completion", "conform"]
    assert tab(bash_script, "vyre run --b", tmp_path) == ["--backend"]
    assert tab(bash_script, "vyre completion ", tmp_path) == ["bash", "fish", "tcsh", "zsh"]
    (tmp_path / "my_kernel.py").write_text("")
    (tmp_path / "my_dir").mkdir()
    assert tab(bash_script, "vyre run my_k", tmp_path) == ["my_kernel.py"]
    assert tab(bash_script, "vyre new-backend gpu --dir my_", tmp_path) == ["my_dir"]


@pytest.mark.parametrize("shell", ["zsh", "tcsh", "fish"])
def test_every_shell_gets_every_sub_command(shell, tmp_path):
    text = script(shell, tmp_path)
    assert all(name in text for name in SUBCOMMANDS), text[:2000]
    if shutil.which(shell) and shell == "zsh":  # (a syntax check where the shell exists)
        proc = subprocess.run(["zsh", "-n", "-c", text], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr


def test_an_unknown_shell_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vyre_core.cli", "completion", "cmd"],
                          cwd=tmp_path, env=fresh_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'cmd'" in proc.stderr

"""The `tiermem` entry point: Ctrl-C while the CLI is still loading is one line and exit 130."""

from __future__ import annotations

import json
import subprocess
import sys

from tiermem.core.errors import EXIT_INTERRUPTED
from tiermem.tui import entry

# Ctrl-C arriving while click is being imported: an import hook raises it at that moment.
PROBE = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from tiermem.tui.entry import main
main(sys.argv[1:])
"""


def test_ctrl_c_while_the_cli_loads_is_one_line_and_130() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, "--help"], capture_output=True, text=True)
    assert done.returncode == EXIT_INTERRUPTED
    assert done.stderr == "tiermem: error: interrupted\n" and done.stdout == ""


def test_with_json_the_interrupt_is_also_a_json_document() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--json", "hot"], capture_output=True, text=True
    )
    assert done.returncode == EXIT_INTERRUPTED
    assert json.loads(done.stdout) == {
        "error": "interrupted",
        "type": "Interrupted",
        "exit_code": EXIT_INTERRUPTED,
    }


def test_the_written_out_code_is_the_documented_one() -> None:
    assert entry.INTERRUPTED == EXIT_INTERRUPTED

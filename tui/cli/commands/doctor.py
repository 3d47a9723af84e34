"""`tiermem doctor`: health checks of the memory home, its database, config, secrets and sync."""

from __future__ import annotations

import click

from tiermem.core.errors import EXIT_WARNINGS
from tiermem.core.paths import Home
from tiermem.ops import doctor as local
from tiermem.ops import doctor_sync as remote
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command(name="doctor")
@click.option("--offline", is_flag=True, help="Skip the checks that contact the sync server.")
@pass_options
def doctor(opts: Options, offline: bool) -> int:
    """Check the memory home, its database, config, secrets and sync (exit 1 on any FAIL)."""
    home = opts.resolved_home()
    if not home.exists():
        raise Home(home).missing()
    checks = local.local_checks(home)
    checks += remote.sync_checks(home, network=not offline)
    failures = sum(c.verdict == local.FAIL for c in checks)
    warnings = sum(c.verdict == local.WARN for c in checks)
    payload = {
        "home": str(home),
        "checks": [c.as_dict() for c in checks],
        "failures": failures,
        "warnings": warnings,
        "ok": failures == 0,
    }
    width = max(len(c.name) for c in checks)
    lines = [f"{c.verdict:<4}  {c.name:<{width}}  {c.detail}" for c in checks]
    lines.append(
        f"{'healthy' if not failures else 'NOT healthy'}: {failures} failure(s), "
        f"{warnings} warning(s)"
    )
    emit(opts, payload, "\n".join(lines))
    return EXIT_WARNINGS if failures else 0

"""Procedural memory: a sequence of commands repeated in 3 conversations is proposed as a skill;
the owner accepts (edited), rejects or exports it; context names an accepted one. CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clikit import Cli


def conversation(path: Path, session: str, ask: str, commands: list[str]) -> Path:
    lines: list[dict[str, object]] = [{"type": "session", "id": session}]
    lines.append({"type": "message", "message": {"role": "user", "content": ask}})
    for command in commands:
        call = {"type": "toolCall", "name": "bash", "arguments": {"command": command}}
        lines.append({"type": "message", "message": {"role": "assistant", "content": [call]}})
    lines.append(
        {"type": "message", "message": {"role": "assistant", "content": "Released and pushed."}}
    )
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


SHIP = ["git pull --rebase", "pytest -q tests/", "git tag v1.{n}", "git push --tags"]


def end(cli: Cli, tmp_path: Path, n: int, commands: list[str]) -> dict[str, object]:
    ask = f"please ship release 1.{n} of the website today"
    path = conversation(tmp_path / f"c{n}.jsonl", f"conv-{n}", ask, commands)
    report: dict[str, object] = cli.json("conversation-end", str(path))
    return report


def test_a_sequence_repeated_in_three_conversations_is_proposed(cli: Cli, tmp_path: Path) -> None:
    for n in (1, 2):
        assert end(cli, tmp_path, n, [c.format(n=n) for c in SHIP])["skills_proposed"] == []
    end(cli, tmp_path, 9, ["ls -la", "git status"])  # another pattern, once
    proposed = end(cli, tmp_path, 3, [c.format(n=3) for c in SHIP])["skills_proposed"]
    assert proposed == ["git-pull-pytest-git-tag-git-push"]
    [skill] = cli.json("skills", "list")["skills"]
    assert skill["status"] == "proposed" and skill["conversations"] == 3
    assert skill["pattern"] == ["run git pull", "run pytest", "run git tag", "run git push"]
    spec = cli.json("skills", "show", skill["name"])["skill"]
    assert spec["steps"][0] == {"action": "run_command", "command": "git pull"}
    assert {"ship", "release", "website"} & set(spec["triggers"])
    assert spec["preconditions"]["commands_available"] == ["git", "pytest"]
    end(cli, tmp_path, 4, [c.format(n=4) for c in SHIP])  # seen again: not proposed twice
    assert len(cli.json("skills", "list")["skills"]) == 1


def test_owner_accepts_an_edited_skill_and_context_names_it(cli: Cli, tmp_path: Path) -> None:
    for n in (1, 2, 3):
        end(cli, tmp_path, n, [c.format(n=n) for c in SHIP])
    name = cli.json("skills", "list")["skills"][0]["name"]
    spec = cli.json("skills", "show", name)["skill"]
    spec["triggers"] = ["ship a release"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(spec))
    accepted = cli.json("skills", "accept", name, "--file", str(edited))
    assert accepted["status"] == "accepted" and accepted["skill"]["triggers"] == ["ship a release"]
    block = cli.json("context", "--query", "can you ship a release of the docs site today")
    assert "## Skills that match" in block["context"] and name in block["context"]
    unrelated = cli.json("context", "--query", "what is the weather like in Lisbon today")
    assert name not in unrelated["context"]
    out = tmp_path / "skills"
    assert cli.json("skills", "export", str(out))["written"] == [str(out / f"{name}.json")]
    assert json.loads((out / f"{name}.json").read_text())["triggers"] == ["ship a release"]


def test_rejected_skills_stay_rejected_and_bad_edits_are_refused(cli: Cli, tmp_path: Path) -> None:
    for n in (1, 2, 3):
        end(cli, tmp_path, n, [c.format(n=n) for c in SHIP])
    name = cli.json("skills", "list")["skills"][0]["name"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": name, "triggers": [], "steps": []}))
    code, _, err = cli("skills", "accept", name, "--file", str(bad))
    assert code == 3 and "triggers" in err
    assert cli.json("skills", "show", name)["status"] == "proposed"
    assert cli.json("skills", "reject", name)["status"] == "rejected"
    end(cli, tmp_path, 5, [c.format(n=5) for c in SHIP])
    assert [s["status"] for s in cli.json("skills", "list")["skills"]] == ["rejected"]
    code, _, err = cli("skills", "show", "no-such-skill")
    assert code == 4 and "no skill" in err


def test_commands_shown_in_plain_text_transcripts_count_as_actions(
    cli: Cli, tmp_path: Path
) -> None:
    proposed: list[object] = []
    for n in (1, 2, 3):
        talk = tmp_path / f"t{n}.txt"
        talk.write_text(
            f"User: the docs site for version {n} needs rebuilding and publishing please\n"
            "Assistant: Rebuilt and published it:\n"
            "```sh\n$ npm ci\n$ npm run build\n$ rsync -a dist/ web:/srv/docs\n```\n"
        )
        proposed = list(cli.json("conversation-end", str(talk))["skills_proposed"])
    assert proposed == ["npm-ci-npm-run-rsync"]
    pattern = cli.json("skills", "show", "npm-ci-npm-run-rsync")["pattern"]
    assert pattern == ["run npm ci", "run npm run", "run rsync"]

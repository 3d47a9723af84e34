"""The skills dialog (K): a proposed skill accepted, edited and accepted, or rejected by keys;
the store form takes tags, the detail pane shows tags and links."""

from __future__ import annotations

import json
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from tests.tui.conftest import make_app, settle
from tests.tui.test_app import drive, goto, keys, open_home, type_text
from tiermem.core import hygiene, links, skills
from tiermem.core.transcript import Transcript
from tiermem.tui.app.screens.skills import SkillsModal


def propose(home: Path) -> str:
    with open_home(home) as mem:
        for n in range(3):
            talk = Transcript(actions=["run git pull", "run make build", "run make deploy"])
            skills.observe(mem, f"conversation:{n}", talk)
        [skill] = skills.listing(mem)
        return skill.name


def status(home: Path, name: str) -> skills.Skill:
    with open_home(home) as mem:
        return skills.get(mem, name)


def test_accept_and_reject_a_proposed_skill_by_keys(demo_home: Path) -> None:
    name = propose(demo_home)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "K")
        assert isinstance(app.screen, SkillsModal)
        await goto(pilot, "a")
        assert status(demo_home, name).status == "accepted"
        await goto(pilot, "r")
        assert status(demo_home, name).status == "rejected"
        await goto(pilot, "escape")
        assert not isinstance(app.screen, SkillsModal)

    drive(app, body)


def test_edit_then_accept_a_skill(demo_home: Path) -> None:
    name = propose(demo_home)
    app = make_app(demo_home)
    spec = status(demo_home, name).spec | {"triggers": ["deploy the site"]}

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "K")
        await goto(pilot, "e")
        await pilot.press("f7", "delete")  # f7 selects all
        await type_text(pilot, json.dumps(spec))  # a whole spec is pasted, as a person would
        await pilot.press("ctrl+s")
        await settle(pilot)
        saved = status(demo_home, name)
        assert saved.status == "accepted" and saved.spec["triggers"] == ["deploy the site"]

    drive(app, body)


def test_store_form_takes_tags(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        await goto(pilot, "s")
        await pilot.press(*keys("The boiler is serviced every October"))
        await pilot.press("tab", *keys("home"), "tab", "tab", "tab", "tab", "tab")
        await pilot.press(*keys("maintenance"), "ctrl+s")
        await settle(pilot)
        with open_home(demo_home) as mem:
            [hit] = mem.retrieve("tag:maintenance", reinforce=False).hits
        assert hit.memory.text == "The boiler is serviced every October"

    drive(app, body)


def test_the_detail_pane_shows_tags_and_links(demo_home: Path) -> None:
    with open_home(demo_home) as mem:
        a = mem.store("The spare key is under the blue pot", "home", 0.5).id
        b = mem.store("The neighbour Ana also has a key", "home", 0.5).id
        hygiene.set_extras(mem, a, ["keys"], None)
        links.link(mem, a, b)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        await pilot.press("slash", *keys("spare key blue pot"), "enter")
        await settle(pilot)
        text = str(app.screen.query_one("#detail-main", Static).render())
        assert "tags keys" in text and f"linked to {b}" in text

    drive(app, body)


def test_the_list_shows_each_skills_status_and_name_as_written(demo_home: Path) -> None:
    """`[proposed]` is data, not a style tag (a markup parse dropped it from the line)."""
    name = propose(demo_home)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "K")
        listing = app.screen.query_one(OptionList)
        line = "".join(segment.text for segment in listing.render_line(0))
        assert f"[proposed] {name} (" in line, line

    drive(app, body)

"""Derived facts and list questions for the conversational set (bench/data/conversations.py).

The facts are what a capable model would extract from each session: short third-person
statements written from the generator's planted truth (the breed, the job, the race ...),
not copies of the turn text, each citing the turns it rests on. Some summarise several
turns ("Caroline's beagle is called Biscuit" rests on the turn that names the breed and
the reply that names the dog); a few are traits or preferences a model infers from turns
in several sessions ("Caroline enjoys physical challenges"), dated by the latest of them.
Each carries the entity, property and value it states.

The list questions gather several things about one person across sessions ("What does
she do in her spare time?", "How many courses has he signed up for?"): their evidence is
one turn per arc, so ten results must cover several sessions to find it all.

Pure functions of an ``Arc`` (its ``name``, ``truth`` and tags); no random draws, so the
turns and the original questions are unchanged by them.
"""

from __future__ import annotations

import re
from typing import Any

#: (tags cited, statement, property, value); the entity is the arc's subject unless the
#: property starts with "@" ("@pet:health" is about the pet)
Fact = tuple[list[str], str, str, str]

_REASONS = {
    "the flights doubled in price": "the flights doubled in price",
    "my cousin's wedding got moved to that week": "{p} cousin's wedding moved to that week",
    "my passport renewal is taking forever": "{p} passport renewal was too slow",
    "we found a crazy deal at the last minute": "they found a last-minute deal",
}


def _third(text: str, t: dict[str, str]) -> str:
    """First person planted text ("sprained my ankle") in the third person."""
    text = re.sub(r"\bmy own\b", f"{t['p']} own", text)
    return re.sub(r"\bmy\b", t["p"], text)


def _facts(name: str, t: dict[str, str]) -> list[Fact]:
    A, p = t["A"], t["p"]
    if name == "pet":
        return [
            (["adopt"], f"{A} adopted a {t['breed']} from an animal rescue", "pet", t["breed"]),
            (["adopt", "name"], f"{A}'s {t['animal']} is named {t['pet']}", "pet_name", t["pet"]),
            (["surgery"], f"{t['pet']} had an operation on a hind leg", "@pet:health", "leg surgery"),
            (["surgery", "recover"], f"{A} was worried about {t['pet']}, who is expected to recover fully",
             "pet_recovery", "expected to recover"),
            (["adopt", "name"], f"{A} has a {t['animal']} to look after at home", "trait_pet_owner", "yes"),
        ]
    if name == "job":
        return [
            (["job"], f"{A} is employed as a {t['job']} at {t['where']}", "occupation", f"{t['job']} at {t['where']}"),
            (["promo"], f"{A} was promoted to {t['promo']}", "promotion", t["promo"]),
            (["quit"], f"{A} left {p} employer and {_third(t['free'], t)}", "employment", "self-employed"),
            (["quit", "quit2"], f"{A} values being independent and working for {p}self",
             "trait_independent", "yes"),
        ]
    if name == "trip":
        reason = _REASONS[t["reason"]].format(p=p)
        return [
            (["plan"], f"{A} planned a two-week summer holiday in {t['first']}", "trip_plan", t["first"]),
            (["plan2"], f"{A} has a partner and children", "family", "partner and kids"),
            (["change"], f"{A} switched the holiday from {t['first']} to {t['second']} because {reason}",
             "trip_destination", t["second"]),
            (["back", "best"], f"{A} travelled to {t['second']}; the highlight was a sunset at an old fort",
             "visited", t["second"]),
        ]
    if name == "race":
        return [
            (["signup", "train"], f"{A} registered for a {t['race']} and trains at dawn", "race_entered", t["race"]),
            (["race", "time"], f"{A} completed the {t['race']} in a little under two hours", "race_result",
             "finished under two hours"),
            (["signup", "race"], f"{A} enjoys physical challenges and endurance sport", "trait_active", "yes"),
        ]
    if name == "instrument":
        return [
            (["buy"], f"{A} is learning to play the {t['instrument']}", "instrument", t["instrument"]),
            (["lessons"], f"{t['teacher'][0].upper() + t['teacher'][1:]} teaches {A} on Saturdays",
             "music_teacher", t["teacher"]),
            (["recital"], f"{A} performed a whole piece at a library recital", "recital", "performed"),
        ]
    if name == "craft":
        return [
            (["class"], f"{A} attends a weekly {t['craft']} class at the community centre", "craft", t["craft"]),
            (["made"], f"{A}'s first {t['craft']} pieces were imperfect: {t['result']}", "craft_made", t["result"]),
            (["market"], f"{A} plans to sell {p} {t['craft']} work at the class market", "craft_market", "selling"),
            (["class", "made"], f"{A} likes making things by hand", "trait_handmade", "yes"),
        ]
    if name == "book":
        return [
            (["book", "about"], f"{A} read {t['book']}, a novel about {t['about']}, and was moved by its ending",
             "book_read", t["book"]),
            (["book"], f"{A} is a fiction reader", "trait_reader", "yes"),
        ]
    if name == "wedding":
        role = "maid of honor" if t["s"] == "she" else "best man"
        return [
            (["engaged"], f"{A}'s {t['sib']} got engaged, with the wedding set for {t['month']}", "sibling_engaged",
             t["sib"]),
            (["role"], f"{A} is the {role} at {p} {t['sib']}'s wedding", "wedding_role", role),
            (["wedding", "speech"], f"{A} gave a speech at {p} {t['sib']}'s wedding and it went well",
             "wedding_speech", "went well"),
        ]
    if name == "move":
        return [
            (["lease", "where"], f"{A} signed a lease to leave {_third(t['old'], t)} for {t['new']}", "home", t["new"]),
            (["quiet"], f"{A} sleeps well in the quiet new home", "home_quiet", "sleeps well"),
        ]
    if name == "volunteer":
        return [
            (["volunteer", "task"], f"{A} volunteers at {t['org']} on weekends, {t['task']}", "volunteering", t["org"]),
            (["fundraiser"], f"{A} agreed to help organise a fundraiser for {t['org']}", "fundraiser", "organising"),
            (["volunteer", "fundraiser"], f"{A} is community-minded and generous with {p} time",
             "trait_community", "yes"),
        ]
    if name == "health":
        return [
            (["injury"], f"{A} {_third(t['injury'], t)} at pickleball", "injury", _third(t["injury"], t)),
            (["treatment"], f"{A}'s treatment: {t['treatment']}", "treatment", t["treatment"]),
            (["healed"], f"{A} has recovered from the pickleball injury", "injury_status", "recovered"),
        ]
    if name == "car":
        return [
            (["died"], f"{A}'s car, {t['old_car']}, broke down for good", "old_car", t["old_car"]),
            (["newcar"], f"{A} now drives {t['new_car']}", "car", t["new_car"]),
        ]
    if name == "garden":
        outcome = ("squirrels ate the tomatoes" if t["plant"] == "tomatoes"
                   else f"a big harvest of {t['plant']}")
        return [
            (["plant"], f"{A} grows {t['plant']} and {t['herb']} in the backyard", "garden", f"{t['plant']}, {t['herb']}"),
            (["harvest"], f"{A}'s garden outcome: {outcome}", "harvest", outcome),
            (["plant"], f"{A} has a backyard and enjoys gardening", "trait_gardener", "yes"),
        ]
    if name == "cook":
        return [
            (["cook"], f"{A} has taken up cooking {t['dish']} at home", "cooking", t["dish"]),
            (["cook"], f"{A} loves ambitious home cooking", "trait_cook", "yes"),
        ]
    if name == "concert":
        return [
            (["concert", "moment"], f"{A} saw {t['artist']} live with {p} cousin and loved it", "concert", t["artist"]),
            (["concert", "moment"], f"{A} enjoys live music", "trait_live_music", "yes"),
        ]
    if name == "class":
        return [
            (["enroll", "hard"], f"{A} is studying {t['course']} and finds {t['topic']} hard", "course", t["course"]),
            (["passed"], f"{A} passed the final exam and earned the certificate", "course_result", "passed"),
            (["enroll", "passed"], f"{A} likes learning new skills", "trait_learner", "yes"),
        ]
    raise ValueError(f"unknown arc {name!r}")


def arc_facts(arc: Any) -> list[tuple[list[str], str, str, str, str]]:
    """(tags, statement, entity, property, value) for every fact derived from ``arc``."""
    out = []
    for tags, text, prop, value in _facts(arc.name, arc.truth):
        entity = arc.truth["A"]
        if prop.startswith("@"):
            subject, prop = prop[1:].split(":")
            entity = arc.truth[subject]
        out.append((tags, text, entity, prop, value))
    return out


#: (kind, question, {arc name: (evidence tag, answer piece)}): asked about each person once
#: two or more of the arcs are theirs (multi-hop: evidence in two or more sessions)
LIST_QUESTIONS: list[tuple[str, str, dict[str, tuple[str, str]]]] = [
    ("multi_hop", "What does {A} do in {p} spare time these days?",
     {"instrument": ("buy", "{instrument}"), "craft": ("class", "{craft}"), "cook": ("cook", "cooking {dish}"),
      "garden": ("plant", "gardening"), "race": ("signup", "running"), "book": ("book", "reading")}),
    ("multi_hop", "Which events has {A} been to this year?",
     {"concert": ("concert", "{artist}"), "wedding": ("wedding", "{sib}'s wedding"),
      "instrument": ("recital", "a library recital"), "race": ("race", "the {race}")}),
    ("multi_hop", "What has gone wrong for {A} lately?",
     {"health": ("injury", "{injury}"), "car": ("died", "car died"), "pet": ("surgery", "{pet} needed surgery")}),
    ("multi_hop", "What milestones has {A} reached?",
     {"job": ("promo", "promotion"), "race": ("race", "finished the {race}"), "class": ("passed", "passed the course"),
      "instrument": ("recital", "first recital")}),
    ("multi_hop", "How many different courses or lessons has {A} signed up for?",
     {"craft": ("class", "{craft}"), "class": ("enroll", "{course}"), "instrument": ("lessons", "{instrument}")}),
    ("inferential", "What would make a good birthday present for {A}?",
     {"cook": ("cook", "something for {dish}"), "craft": ("class", "{craft} supplies"),
      "instrument": ("buy", "{instrument} gear"), "book": ("book", "a novel"), "garden": ("plant", "garden tools"),
      "concert": ("concert", "concert tickets")}),
]


def list_questions(subject: str, arcs: list[tuple[int, Any]]) -> list[tuple[str, str, list[tuple[int, str]], str]]:
    """(kind, question, [(arc index, tag)], answer) for the list questions about ``subject``.

    ``arcs`` are (index, arc) of that subject's arcs in the conversation.
    """
    out = []
    by_name = {arc.name: (index, arc) for index, arc in arcs}
    for kind, template, parts in LIST_QUESTIONS:
        present = [(name, part) for name, part in parts.items() if name in by_name]
        if len(present) < 2:
            continue
        truth = by_name[present[0][0]][1].truth
        evidence = [(by_name[name][0], tag) for name, (tag, _) in present]
        pieces = [_third(piece.format(**by_name[name][1].truth), truth) for name, (_, piece) in present]
        answer = str(len(pieces)) + ": " + ", ".join(pieces) if template.startswith("How many") else ", ".join(pieces)
        out.append((kind, template.format(A=subject, p=truth["p"]), evidence, answer))
    return out

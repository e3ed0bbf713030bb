"""Derived facts and list questions for the conversational set (bench/data/conversations.py).

The facts are what a capable model writes per session when it reads a chat: short
third-person statements about everything a turn states — the story turns, the passing
mentions, the chit-chat ("Jon has been tired because work is nonstop") — most of them
about things no question asks. Each cites the one turn it restates, is phrased around
that turn's own event in one of a few wordings, and carries the entity, property and value
it states. Like a model, the writer misses details: a fifth of the story turns get no
fact (``MISSED``), so some evidence is found only as an episode.

The list questions gather several things about one person across sessions ("What does
she do in her spare time?", "How many courses has he signed up for?"): their evidence is
one turn per arc, so ten results must cover several sessions to find it all.

Pure functions of an ``Arc`` (its ``name``, ``truth`` and tags) and of a random generator
of their own; the turns and the questions never depend on them.
"""

from __future__ import annotations

import random
import re
from typing import Any

#: the share of story turns a model writes no fact for
MISSED = 0.2

#: (tag, wordings, property, value): one fact about the turn carrying ``tag``; the entity
#: is the arc's subject unless the property names another ("@pet:health" is about the pet,
#: "@B:..." about the friend)
Fact = tuple[str, tuple[str, ...], str, str]

_REASONS = {
    "the flights doubled in price": "the flights doubled in price",
    "my cousin's wedding got moved to that week": "{p} cousin's wedding moved to that week",
    "my passport renewal is taking forever": "{p} passport renewal was taking too long",
    "we found a crazy deal at the last minute": "they found a last-minute deal",
}


def _third(text: str, t: dict[str, str]) -> str:
    """First person planted text ("sprained my ankle") in the third person."""
    text = re.sub(r"\bmy own\b", f"{t['p']} own", text)
    return re.sub(r"\bmy\b", t["p"], text)


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _facts(name: str, t: dict[str, str]) -> list[Fact]:
    A, B, p = t["A"], t["B"], t["p"]
    if name == "pet":
        pet, animal = t["pet"], t["animal"]
        return [
            ("adopt", (f"{A} brought home a {t['breed']} from an animal rescue on {t['day']}",
                       f"{A} adopted a {t['breed']} from a rescue"), "pet", t["breed"]),
            ("name", (f"{A}'s new {animal} is called {pet} and has taken over the couch",
                      f"{A} named the {animal} {pet}"), "pet_name", pet),
            ("pics", (f"{B} wants lots of pictures of {A}'s new {animal}",), "@B:wants_pet_pictures", "yes"),
            ("surgery", (f"{pet} had surgery on {t['ppos']} back leg", f"{A}'s {animal} {pet} needed leg surgery"),
             "@pet:health", "leg surgery"),
            ("recover", (f"The vet told {A} that {pet} will be fine after a cone and rest",
                         f"{A} barely slept while {pet} recovered; the vet expects {pet} to be fine"),
             "pet_recovery", "expected to be fine"),
            ("echo1", (f"{pet} likes to sleep on {A}'s feet", f"{A} says {pet} is asleep on {p} feet"),
             "@pet:habit", "sleeps on feet"),
        ]
    if name == "job":
        return [
            ("job", (f"{A} works as a {t['job']} at {t['where']} and finds the team lovely",
                     f"{A}'s job as a {t['job']} at {t['where']} is hectic but going well"),
             "occupation", f"{t['job']} at {t['where']}"),
            ("stress", (f"{A} had sounded stressed about the new job before",), "job_stress", "earlier"),
            ("promo", (f"{A} was offered the {t['promo']} role", f"{A} got an offer to become {t['promo']}"),
             "promotion", t["promo"]),
            ("promo2", (f"{A}'s new role brings more money and much more responsibility",), "role_pay", "more"),
            ("quit", (f"{A} quit {p} job and {_third(t['free'], t)}", f"{A} left {p} employer: {A} {_third(t['free'], t)}"),
             "employment", "self-employed"),
            ("quit2", (f"{A} finds being {p} own boss terrifying and freeing",), "own_boss", "terrifying and freeing"),
            ("echo0", (f"{A} is having a very busy week at {t['where']}",), "work_week", "busy"),
        ]
    if name == "trip":
        reason = _REASONS[t["reason"]].format(p=p)
        return [
            ("plan", (f"{A} is planning a couple of weeks in {t['first']} this summer",
                      f"{A} is thinking about a summer vacation in {t['first']}"), "trip_plan", t["first"]),
            ("plan2", (f"{A} will travel with {p} partner, the first trip without the kids",), "travel_with", "partner"),
            ("change", (f"{A} changed the vacation to {t['second']} because {reason}",
                        f"{A} is going to {t['second']} instead, since {reason}"), "trip_destination", t["second"]),
            ("back", (f"{A} got back from {t['second']} after eating a lot and walking 20,000 steps a day",
                      f"{A} returned from the trip to {t['second']}"), "visited", t["second"]),
            ("best", (f"{A} watched the sunset from an old fort on the last night of the trip",),
             "trip_highlight", "sunset at an old fort"),
            ("echo0", (f"{A} keeps looking at travel photos of {t['first']} and {t['second']}",),
             "travel_photos", f"{t['first']}, {t['second']}"),
        ]
    if name == "race":
        return [
            ("signup", (f"{A} signed up for a {t['race']}", f"{A} registered for a {t['race']}"),
             "race_entered", t["race"]),
            ("train", (f"{A} gets up at 5 to train for the {t['dist']} race",
                       f"{A} has been training at 5am and {p} legs are sore"), "training", "5am"),
            ("race", (f"{A} finished the {t['race']} on Sunday", f"{A} completed the {t['race']}"),
             "race_result", "finished"),
            ("time", (f"{A} finished in just under two hours and cried at the finish line",),
             "race_time", "under two hours"),
            ("echo0", (f"{A} still feels the {t['race']} training in {p} legs",), "race_legs", "sore"),
        ]
    if name == "instrument":
        return [
            ("buy", (f"{A} bought a secondhand {t['instrument']} to learn to play",
                     f"{A} has always wanted to learn the {t['instrument']} and bought one"),
             "instrument", t["instrument"]),
            ("lessons", (f"{A} takes lessons with {t['teacher']} on Saturdays",), "music_teacher", t["teacher"]),
            ("recital", (f"{A} played a first full song at a library recital, hands shaking",
                         f"{A} performed at the little recital at the library"), "recital", "performed"),
            ("echo0", (f"{A} practised the {t['instrument']} for an hour",), "practice", "an hour"),
        ]
    if name == "craft":
        return [
            ("class", (f"{A} started a {t['craft']} class on Thursday nights at the community center",
                       f"{A} takes a Thursday night {t['craft']} class"), "craft", t["craft"]),
            ("made", (f"{A} has made {_third(t['result'], t)} and loves them anyway",), "craft_made", t["result"]),
            ("market", (f"{A} will sell some of {p} work at the class market at the end of the month",),
             "craft_market", "selling"),
            ("coming", (f"{B} plans to come to {A}'s class market",), "@B:market_visit", "coming"),
            ("echo0", (f"{A} missed {p} {t['craft']} class this week and was bummed",), "craft_missed", "missed"),
        ]
    if name == "book":
        return [
            ("book", (f"{A} finished {t['book']} and keeps thinking about it", f"{A} just read {t['book']}"),
             "book_read", t["book"]),
            ("about", (f"{t['book']} is about {t['about']}; {A} was wrecked by the ending",),
             "book_topic", t["about"]),
            ("echo0", (f"{B} started reading {t['book']} because of {A}",), "@B:reading", t["book"]),
        ]
    if name == "wedding":
        role = "maid of honor" if t["s"] == "she" else "best man"
        return [
            ("engaged", (f"{A}'s {t['sib']} got engaged and the wedding is in {t['month']}",),
             "sibling_engaged", t["sib"]),
            ("role", (f"{A} is the {role} at the wedding",), "wedding_role", role),
            ("wedding", (f"{A}'s {t['sib']} had the wedding this weekend and looked very happy",),
             "sibling_wedding", "this weekend"),
            ("speech", (f"{A} forgot one line of the speech but everyone cried anyway",), "wedding_speech",
             "went fine"),
            ("echo0", (f"{A}'s {t['sib']} keeps sending wedding messages at midnight",), "wedding_messages",
             "at midnight"),
        ]
    if name == "move":
        return [
            ("lease", (f"{A} signed a lease and is moving out of {_third(t['old'], t)} next month",),
             "home_before", t["old"]),
            ("where", (f"{A} is moving to {t['new']} and feels emotional about it",), "home", t["new"]),
            ("boxes", (f"{A} found {p} high school yearbook while unpacking",), "unpacking", "yearbook"),
            ("quiet", (f"{A}'s new place is quiet at night and {A} sleeps well",), "home_quiet", "sleeps well"),
            ("echo1", (f"{A} still has boxes everywhere at the new place",), "boxes", "unpacked"),
        ]
    if name == "volunteer":
        return [
            ("volunteer", (f"{A} started volunteering at {t['org']} on weekends",), "volunteering", t["org"]),
            ("task", (f"{A}'s volunteer work is mostly {t['task']}",), "volunteer_task", t["task"]),
            ("fundraiser", (f"{A} agreed to help organize a fundraiser next month",), "fundraiser", "organising"),
            ("echo0", (f"{A} worked a long shift at {t['org']}",), "volunteer_shift", "long"),
        ]
    if name == "health":
        return [
            ("injury", (f"{A} {_third(t['injury'], t)} playing pickleball",), "injury", _third(t["injury"], t)),
            ("treatment", (f"{A}'s doctor ordered {t['treatment']}",), "treatment", t["treatment"]),
            ("healed", (f"{A} is almost back to normal and had a first day without pain",), "injury_status",
             "almost healed"),
            ("echo1", (f"{A} is not going back to pickleball anytime soon",), "pickleball", "stopped"),
        ]
    if name == "car":
        return [
            ("died", (f"{A}'s car, {t['old_car']}, died on the highway",), "old_car", t["old_car"]),
            ("loved", (f"{A} loved {p} old car",), "loved_old_car", "yes"),
            ("newcar", (f"{A} got {t['new_car']} as a new car",), "car", t["new_car"]),
            ("roadtrip", (f"{A} is planning a road trip in the new car",), "road_trip", "planning"),
            ("echo0", (f"{A} has had car trouble again",), "car_trouble", "again"),
        ]
    if name == "garden":
        harvest = ("squirrels ate all of {A}'s tomatoes" if t["plant"] == "tomatoes"
                   else "{A} had {plant} with every meal this week").format(A=A, plant=t["plant"])
        return [
            ("plant", (f"{A} planted {t['plant']} and {t['herb']} in the backyard",), "garden",
             f"{t['plant']}, {t['herb']}"),
            ("harvest", (_cap(harvest),), "harvest", "eaten by squirrels" if t["plant"] == "tomatoes" else "plenty"),
            ("echo0", (f"{A}'s {t['herb']} is taking over the backyard",), "herb_garden", "spreading"),
        ]
    if name == "cook":
        return [
            ("cook", (f"{A} has been obsessed with making {t['dish']} at home",
                      f"{A} is spending a lot of time making {t['dish']}"),
             "cooking", t["dish"]),
            ("mess", (f"{A}'s kitchen is a disaster zone",), "kitchen", "messy"),
            ("echo0", (f"{A} made {t['dish']} again",), "cooked_again", t["dish"]),
        ]
    if name == "concert":
        return [
            ("concert", (f"{A} went to see {t['artist']} with {p} cousin",), "concert", t["artist"]),
            ("moment", (f"{A} found the show magical: they {t['moment']}",), "concert_moment", t["moment"]),
            ("echo0", (f"{A} still has {t['artist']} stuck in {p} head",), "earworm", t["artist"]),
        ]
    if name == "class":
        return [
            ("enroll", (f"{A} enrolled in {t['course']}",), "course", t["course"]),
            ("hard", (f"{A} is struggling with the {t['topic']} part of the course",), "course_hard", t["topic"]),
            ("passed", (f"{A} passed the final and framed the certificate",), "course_result", "passed"),
            ("echo0", (f"{A} is studying for {t['course']} all weekend",), "studying", "all weekend"),
        ]
    raise ValueError(f"unknown arc {name!r}")


def arc_facts(arc: Any, rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """(tag, statement, entity, property, value) for every fact a model derives from ``arc``.

    ``rng`` picks each fact's wording and the details missed (``MISSED``).
    """
    out = []
    for tag, wordings, prop, value in _facts(arc.name, arc.truth):
        text = rng.choice(wordings)
        if rng.random() < MISSED:
            continue
        entity = arc.truth["A"]
        if prop.startswith("@"):
            subject, prop = prop[1:].split(":")
            entity = arc.truth[subject]
        out.append((tag, text, entity, prop, value))
    return out


#: chit-chat that states something -> (wordings, property, value); {A} is the speaker,
#: {B} the friend. Reactions ("Haha, that's so you.") state nothing and get no fact.
CHAT_FACTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "Honestly this week flew by, I can't believe it's already the weekend again.":
        (("{A} felt the week flew by", "{A} can't believe it is already the weekend again"), "week", "flew by"),
    "I've been so tired lately, work has been nonstop.":
        (("{A} has been very tired because work has been nonstop", "{A} is worn out by nonstop work"),
         "tired", "work nonstop"),
    "My mom called again asking about the holidays, you know how it is.":
        (("{A}'s mom keeps calling about the holidays", "{A}'s mother called again to ask about holiday plans"),
         "mother_calls", "holidays"),
    "We should grab coffee soon, it's been way too long.":
        (("{A} wants to grab coffee with {B} soon",), "coffee_with_friend", "soon"),
    "The weather has been wild here, sunny one day and pouring the next.":
        (("The weather where {A} lives has been wild, sunny then pouring",), "weather", "changeable"),
    "I keep meaning to read more but I just end up scrolling on my phone.":
        (("{A} wants to read more but ends up scrolling on {p} phone",), "reading_habit", "scrolls instead"),
    "Did you watch the game last night? What a finish.":
        (("{A} watched the game last night and loved the finish",), "watched_game", "yes"),
    "I'm trying to drink more water and go to bed earlier, wish me luck.":
        (("{A} is trying to drink more water and go to bed earlier",), "health_goal", "water and sleep"),
    "Ugh, my neighbor's been doing renovations since 7am every day.":
        (("{A}'s neighbor has been renovating from 7am every day",), "neighbor", "renovating"),
    "That reminds me, I still owe you a call about that thing.":
        (("{A} owes {B} a phone call",), "owes_call", "yes"),
    "Family stuff is always complicated, isn't it?": (("{A} finds family matters complicated",), "family", "complicated"),
    "Work is work, you know. Same old meetings.":
        (("{A}'s work has been the same old meetings",), "work_routine", "meetings"),
    "Sometimes you just need a quiet evening at home with a good show.":
        (("{A} enjoys a quiet evening at home with a good show",), "evenings", "quiet, a show"),
    "I feel like I haven't had a real break in months.":
        (("{A} has not had a real break in months",), "break", "none in months"),
    "My brother says hi, by the way. He asks about you all the time.":
        (("{A}'s brother says hi to {B} and often asks about {B}",), "brother", "asks about friend"),
    "I've been meaning to clean out my closet for weeks now.":
        (("{A} has been meaning to clean out {p} closet for weeks",), "closet", "to clean"),
    "Traffic this morning was unbelievable, took me an hour to get anywhere.":
        (("{A} spent an hour in traffic this morning",), "traffic", "an hour"),
    "Yeah, I think everyone's feeling a bit burnt out lately.":
        (("{A} thinks everyone is feeling burnt out lately",), "burnout", "everyone"),
    "We finally fixed the leaky kitchen tap, small victories!":
        (("{A} finally fixed the leaky kitchen tap",), "kitchen_tap", "fixed"),
    "I tried a new recipe last night and it was a total disaster, lol.":
        (("{A} tried a new recipe that was a total disaster",), "new_recipe", "disaster"),
}


def chat_fact(text: str, speaker: dict[str, str], friend: str, rng: random.Random) -> tuple[str, str, str] | None:
    """(statement, property, value) a model derives from a chit-chat turn, or None."""
    found = CHAT_FACTS.get(text)
    if found is None:
        return None
    wordings, prop, value = found
    statement = rng.choice(wordings).format(A=speaker["name"], B=friend, p=speaker["pos"], o=speaker["obj"])
    return _cap(statement), prop, value


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
    ("multi_hop", "What new things has {A} brought into {p} life this year?",
     {"pet": ("adopt", "a {breed}"), "instrument": ("buy", "a {instrument}"), "car": ("newcar", "{new_car}"),
      "move": ("where", "{new}")}),
    ("multi_hop", "What has {A} done for other people lately?",
     {"volunteer": ("volunteer", "{org}"), "wedding": ("role", "the wedding speech"),
      "craft": ("market", "the class market"), "cook": ("cook", "cooked {dish}")}),
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

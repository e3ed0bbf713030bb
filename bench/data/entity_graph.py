"""Deterministic generator of the entity set (``python -m bench.data.entity_graph``).

A small engineering organisation as an agent would have consolidated it: people and the
projects they work on, stated as facts, with resolved entities (a canonical name and its
aliases), relationships between them and some chatter episodes. The questions are asked
the way people ask them: by first name, sharing few words with the fact that answers.

* **people** (24): canonical name "First Last", aliases the first name and a handle
  ("achen"). Facts name a person by the full name or by the handle, so a question by
  first name often shares no word with its answer.
* **projects** (16): canonical name ("loyalty platform") and a code name ("Kestrel"). Each has three attribute facts (its datastore, its
  language, where it runs), named by canonical name or code name.
* per person: the project they work on now (a ``works_on`` fact and relationship); for
  half of them an earlier project, asserted first and superseded by the current one
  (``stale``); a role, an office and a manager (``reports_to`` relationship: a neighbour
  that is not the answer); three chatter episodes that name them by first name.

Question types:

* ``alias``: "What is Alice working on these days?" — relevant: the current
  ``works_on`` fact (stale: the superseded one);
* ``one_hop``: "Which datastore is behind what Alice works on?" — relevant: the current
  ``works_on`` fact and the project's attribute fact (the answer is one hop away).

Split by person: even-numbered people are DEV, odd TEST. Writes two JSONL files next to
this script (committed; regenerating must reproduce them byte for byte):
``entity_graph.jsonl`` (one record per line, ``"record"`` = namespace, entity, episode,
fact or relationship, in load order) and ``entity_questions.jsonl``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bench.data import jsonl

SEED = 20261201
HERE = Path(__file__).parent
GRAPH_FILE = "entity_graph.jsonl"
QUESTIONS_FILE = "entity_questions.jsonl"
NAMESPACE = "/acme/org"
#: questions are asked over the whole /acme tree, beside the agent-memory set's work namespaces
SCOPE = "/acme"

PEOPLE = [
    ("Alice", "Chen"), ("Bilal", "Okafor"), ("Camille", "Dubois"), ("Dmitri", "Volkov"), ("Esther", "Nakamura"),
    ("Fergus", "Reilly"), ("Greta", "Lindqvist"), ("Hamid", "Rahimi"), ("Imogen", "Walsh"), ("Joaquin", "Herrera"),
    ("Keiko", "Tanaka"), ("Lorenzo", "Bianchi"), ("Maren", "Solberg"), ("Nikhil", "Iyer"), ("Odile", "Marchand"),
    ("Piotr", "Zielinski"), ("Quentin", "Moreau"), ("Rhea", "Kapoor"), ("Soren", "Madsen"), ("Thandiwe", "Mbeki"),
    ("Ulrich", "Becker"), ("Valentina", "Rossi"), ("Wendell", "Price"), ("Yusra", "Haddad"),
]

#: (canonical name, code name, datastore, language, runs on)
PROJECTS = [
    ("loyalty platform", "Kestrel", "Postgres 16", "Kotlin", "the Frankfurt Kubernetes cluster"),
    ("courier tracker", "Heron", "DynamoDB", "Go", "AWS Lambda"),
    ("catalog importer", "Puffin", "MongoDB 7", "Python", "a pair of bare-metal boxes in Dublin"),
    ("voice assistant", "Osprey", "Redis and SQLite", "Rust", "edge devices in the stores"),
    ("partner portal", "Lapwing", "MySQL 8", "TypeScript", "Vercel"),
    ("returns desk", "Plover", "CockroachDB", "Java", "the on-premise OpenShift cluster"),
    ("churn predictor", "Curlew", "BigQuery", "Scala", "Dataproc"),
    ("mobile wallet", "Avocet", "Spanner", "Swift", "Google Cloud Run"),
    ("invoice archive", "Gannet", "ClickHouse", "Elixir", "Fly.io"),
    ("kitchen display", "Dunlin", "CouchDB", "Dart", "Android tablets in the restaurants"),
    ("route planner", "Merlin", "Neo4j", "C++", "the Virginia GPU fleet"),
    ("fleet monitor", "Shrike", "InfluxDB", "Elm", "a Raspberry Pi in every van"),
    ("price scraper", "Siskin", "Elasticsearch", "Ruby", "Heroku"),
    ("review moderator", "Bittern", "Cassandra", "PHP", "the shared Nomad cluster"),
    ("onboarding wizard", "Wryneck", "Firestore", "Clojure", "Netlify"),
    ("warehouse controller", "Godwit", "Oracle 19c", "Ada", "PLCs on the warehouse floor"),
]

ROLES = ["a staff engineer", "a senior backend engineer", "the tech lead", "a data scientist",
         "a frontend engineer", "an SRE", "a mobile engineer", "a QA engineer"]
OFFICES = ["Lisbon", "Berlin", "Warsaw", "Nairobi", "Osaka", "Toronto", "Porto", "Lagos", "Stockholm", "Austin"]

# how a fact names someone working on something: {who} = full name or handle, {what} =
# canonical name or code name of the project
WORKS_ON = [
    "{who} moved to the {what} team this quarter.",
    "{who} now spends most of the week on {what}.",
    "{who} picked up {what} after the reorg.",
    "{who} is the main contributor to {what} these days.",
]
PREVIOUSLY = "{who} works on {what}."
ATTRIBUTES = {
    "datastore": "{what} keeps its records in {value}.",
    "language": "The {what} codebase is {value} all the way down.",
    "runs_on": "{what} is deployed to {value}.",
}
ROLE = "{who} is {value}."
OFFICE = "{who} sits in the {value} office."
REPORTS_TO = "{who} reports to {manager}."
CHATTER = [
    "{first} brought cake for the whole floor today.",
    "{first} is out on Friday for a dentist appointment.",
    "Reminder: {first} wants the meeting room booked before ten.",
    "{first} asked whether anyone has a spare HDMI adapter.",
    "{first} shared a photo from the weekend hike.",
    "{first} will be late to standup tomorrow.",
]

ALIAS_QUESTIONS = [
    "What is {first} working on these days?",
    "Which project keeps {first} busy at the moment?",
    "What does {first} spend their time on now?",
]
HOP_QUESTIONS = {
    "datastore": ["Which database does {first}'s project use?", "Where is the data for {first}'s product stored?"],
    "language": ["What programming language does {first}'s team write?", "Which language is {first}'s project coded in?"],
    "runs_on": ["Where does the thing {first} builds run in production?", "What infrastructure hosts {first}'s project?"],
}


def handle(first: str, last: str) -> str:
    return (first[0] + last).lower()


def build(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    graph: list[dict[str, Any]] = [{"record": "namespace", "namespace": NAMESPACE}]
    questions: list[dict[str, Any]] = []
    people = [(f, last, f"{f} {last}", handle(f, last)) for f, last in PEOPLE]
    for _, _, full, short in people:
        graph.append({"record": "entity", "namespace": NAMESPACE, "name": full, "kind": "person",
                      "aliases": [full.split()[0], short]})
    for name, code, *_ in PROJECTS:
        graph.append({"record": "entity", "namespace": NAMESPACE, "name": name, "kind": "project",
                      "aliases": [code]})
    facts = 0

    def fact(content: str, entity: str, prop: str, value: str, mentions: list[str]) -> str:
        nonlocal facts
        facts += 1
        key = f"efact-{facts:04d}"
        graph.append({"record": "fact", "namespace": NAMESPACE, "key": key, "content": content,
                      "entity": entity, "property": prop, "value": value, "mentions": mentions})
        return key

    def relationship(source: str, relation: str, target: str, fact_key: str) -> None:
        graph.append({"record": "relationship", "namespace": NAMESPACE, "from": source, "relation": relation,
                      "to": target, "fact": fact_key})

    def project_name(name: str, code: str) -> str:
        return rng.choice([name, code])

    attribute_keys: dict[tuple[str, str], str] = {}
    for name, code, *values in PROJECTS:
        for (prop, template), value in zip(ATTRIBUTES.items(), values, strict=True):
            text = template.format(what=project_name(name, code), value=value)
            attribute_keys[(name, prop)] = fact(text[0].upper() + text[1:], name, prop, value, [name])

    assignments = rng.sample(range(len(PROJECTS)), len(PROJECTS)) + rng.choices(range(len(PROJECTS)), k=8)
    managers = {i: (i // 6) * 6 for i in range(len(people))}  # four teams of six, the first one leads
    for index, (first, _, full, short) in enumerate(people):
        episodes = rng.sample(CHATTER, 3)
        for number, text in enumerate(episodes, start=1):
            graph.append({"record": "episode", "namespace": NAMESPACE, "key": f"eep-{index:02d}-{number}",
                          "content": text.format(first=first),
                          "occurred_at": f"2026-0{1 + (index + number) % 9}-{10 + number:02d}T09:00:00+00:00"})
        role, office = rng.choice(ROLES), rng.choice(OFFICES)
        fact(ROLE.format(who=full, value=role), full, "role", role, [full])
        fact(OFFICE.format(who=rng.choice([full, short]), value=office), full, "office", office, [full])
        if managers[index] != index:
            manager = people[managers[index]][2]
            key = fact(REPORTS_TO.format(who=full, manager=manager), full, "reports_to", manager, [full, manager])
            relationship(full, "reports_to", manager, key)
        stale: list[str] = []
        project, code, *_ = PROJECTS[assignments[index]]
        if index % 4 in (1, 2):  # half of them worked on something else first
            old_name, old_code, *_ = PROJECTS[(assignments[index] + 5) % len(PROJECTS)]
            old = fact(PREVIOUSLY.format(who=full, what=project_name(old_name, old_code)), full, "works_on",
                       old_name, [full, old_name])
            relationship(full, "works_on", old_name, old)
            stale.append(old)
        # two in three current assignments name the person by their handle only
        who = short if index % 3 != 0 else full
        current = fact(rng.choice(WORKS_ON).format(who=who, what=project_name(project, code)), full, "works_on",
                       project, [full, project])
        relationship(full, "works_on", project, current)

        split = "dev" if index % 2 == 0 else "test"
        questions.append({"type": "alias", "split": split, "namespaces": SCOPE, "subject": full,
                          "query": rng.choice(ALIAS_QUESTIONS).format(first=first),
                          "relevant": [current], "stale": stale})
        for prop in rng.sample(sorted(HOP_QUESTIONS), 2):
            questions.append({"type": "one_hop", "split": split, "namespaces": SCOPE, "subject": full,
                              "query": rng.choice(HOP_QUESTIONS[prop]).format(first=first),
                              "relevant": [current, attribute_keys[(project, prop)]], "stale": stale})
    for number, q in enumerate(questions, start=1):
        q["id"] = f"e-q{number:03d}"
    return {"graph": graph, "questions": questions}


def write(data: dict[str, list[dict[str, Any]]], directory: Path = HERE) -> dict[str, int]:
    """Write the two JSONL files; returns their line counts."""
    jsonl.write_files({GRAPH_FILE: data["graph"], QUESTIONS_FILE: data["questions"]}, directory)
    return {"records": len(data["graph"]), "questions": len(data["questions"])}


def load(directory: Path = HERE) -> dict[str, list[dict[str, Any]]]:
    """Read the committed set: {"graph": [...], "questions": [...]}."""
    return jsonl.read_files({"graph": GRAPH_FILE, "questions": QUESTIONS_FILE}, directory)


def main() -> None:
    counts = write(build())
    print(", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main()

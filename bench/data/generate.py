"""Deterministic generator of the labelled retrieval set (``python -m bench.data.generate``).

Writes three JSONL files next to this script (committed; regenerate to check they match):

* ``episodes.jsonl`` — ``{"key", "namespace", "content", "occurred_at", "kind", "topic"}``:
  agent memories over several namespaces — preferences, project facts, incidents with
  identifiers (``INC-4821``, ``ERR_CONN_RESET``, versions), people, schedules, dated
  decisions, deploy logs, and chit-chat distractors.
* ``facts.jsonl`` — ``{"key", "namespace", "content", "entity", "property", "value",
  "sources"}``: caller-asserted facts, loaded in file order with ``supersede=True``, so a
  later fact on the same entity+property retires the earlier one (the "updated" cases).
* ``questions.jsonl`` — ``{"id", "split", "type", "query", "namespaces", "relevant",
  "stale"}``: ``relevant`` lists the episode/fact keys that answer the question (recall@k is
  the share of them in the top k; MRR uses the first); ``stale`` lists superseded items
  that must not outrank the answer (type ``updated``).

Question types: ``paraphrase`` (no shared keywords beyond a name), ``identifier`` (exact
incident ids, error codes, versions), ``temporal`` (the month named in the memory),
``updated`` (an old value and its correction; for half, facts asserted with supersede),
``distractor`` (the answer hides among near-duplicates differing in one detail).
Splits alternate per type (even index: dev, odd: test), so both splits hold every type.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.data import jsonl

SEED = 20260301
HERE = Path(__file__).parent
YEAR = 2026
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]

FIRST = [
    "Maya", "Tom", "Priya", "Lukas", "Aiko", "Diego", "Fatima", "Oskar", "Chen", "Nadia",
    "Rafael", "Ingrid", "Kwame", "Sofia", "Mateo", "Hana", "Viktor", "Leila", "Jonas", "Amara",
    "Elif", "Bruno", "Yusuf", "Greta", "Ravi", "Camille", "Dmitri", "Zoe", "Emeka", "Lucia",
]
LAST = [
    "Raman", "Keller", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Silva", "Brennan",
    "Kowalski", "Achebe", "Fischer", "Costa", "Yamamoto", "Petrov", "Nguyen", "Larsen", "Duarte", "Schmidt",
    "Ibrahim", "Rossi", "Varga", "Mendes", "Iyer", "Dubois", "Sato", "Ortega", "Mensah", "Berg",
]
SERVICES = [
    "checkout-api", "payments-gateway", "search-indexer", "auth-service", "billing-worker", "notification-hub",
    "inventory-sync", "ledger-service", "image-resizer", "report-builder", "session-store", "feature-flags",
    "rate-limiter", "webhook-relay", "pricing-engine", "audit-log", "geo-lookup", "email-sender",
]
ERRORS = [
    "ERR_CONN_RESET", "ETIMEDOUT", "ECONNREFUSED", "ERR_TLS_HANDSHAKE", "OOMKilled", "ERR_DISK_FULL",
    "DEADLINE_EXCEEDED", "ERR_POOL_EXHAUSTED", "SIGSEGV", "ERR_DNS_NXDOMAIN", "ERR_LOCK_TIMEOUT",
    "ERR_CERT_EXPIRED", "ERR_QUOTA_EXCEEDED", "ERR_SCHEMA_MISMATCH",
]
COMPONENTS = [
    "the payments sidecar", "the Redis cluster", "the primary Postgres", "the CDN edge", "the Kafka brokers",
    "the NAT gateway", "the ingress controller", "the object store", "the DNS resolver", "the job scheduler",
]
HTTP_CODES = ["500", "502", "503", "504", "429"]
COMPONENT_PARAPHRASE = {
    "the payments sidecar": "the proxy next to the payment container", "the Redis cluster": "our cache nodes",
    "the primary Postgres": "the main SQL database", "the CDN edge": "the content delivery edge servers",
    "the Kafka brokers": "the event streaming brokers", "the NAT gateway": "the outbound network gateway",
    "the ingress controller": "the load balancer in front of the cluster", "the object store": "blob storage",
    "the DNS resolver": "name resolution", "the job scheduler": "the background task scheduler",
}
ERROR_PARAPHRASE = {
    "ERR_CONN_RESET": "connections dropped by the peer", "ETIMEDOUT": "calls timing out",
    "ECONNREFUSED": "connections refused", "ERR_TLS_HANDSHAKE": "a failed TLS negotiation",
    "OOMKilled": "processes killed for using too much memory", "ERR_DISK_FULL": "no space left on the volume",
    "DEADLINE_EXCEEDED": "requests running past their deadline", "ERR_POOL_EXHAUSTED": "no free pooled connections",
    "SIGSEGV": "a segmentation fault", "ERR_DNS_NXDOMAIN": "a hostname that did not resolve",
    "ERR_LOCK_TIMEOUT": "waiting too long on a lock", "ERR_CERT_EXPIRED": "an expired certificate",
    "ERR_QUOTA_EXCEEDED": "hitting a quota", "ERR_SCHEMA_MISMATCH": "incompatible schemas",
}
ENV_PARAPHRASE = {"production": "prod", "staging": "the pre-prod environment", "canary": "the canary hosts"}

NS_WORK = ["/acme/payments", "/acme/platform", "/acme/frontend", "/acme/data"]
NS_PERSONAL = "/personal"
NS_PREFS = "/self/preferences"
NS_RESEARCH = "/research/orion"
ALL_NAMESPACES = [*NS_WORK, NS_PERSONAL, NS_PREFS, NS_RESEARCH]

# preference dimension: (statement template, question template, values)
PREFERENCES = [
    ("{p} prefers {v} for code indentation in Python files.",
     "How does {p} like Python source to be indented?", ["tabs", "four spaces", "two spaces"]),
    ("{p} likes the {v} colour theme in every editor.",
     "Which look does {p} want for IDE colours?", ["dark", "light", "solarized", "high-contrast"]),
    ("{p} drinks {v} in the morning and does not want anything else offered.",
     "What beverage should I offer {p} before noon?", ["green tea", "black coffee", "oat-milk latte", "hot chocolate"]),
    ("{p} wants code review comments sent {v}.",
     "How should feedback on pull requests reach {p}?", ["as a single summary email", "inline on GitHub", "over a short call"]),
    ("{p} is vegetarian and avoids {v}.",
     "What food should be left out when ordering lunch for {p}?", ["mushrooms", "spicy dishes", "dairy", "nuts"]),
    ("{p} only takes meetings {v}.",
     "When can I book time with {p}?", ["before 11:00", "after lunch", "on Tuesdays and Thursdays", "in the afternoon"]),
]

QUEUE_TOPICS = [
    ("the job queue", "move the job queue from RabbitMQ to Postgres with SKIP LOCKED",
     "replace the Postgres job queue with Redis streams", "job queue"),
    ("the mobile release", "ship the mobile release every two weeks on Wednesdays",
     "switch the mobile release to a monthly train", "mobile release"),
    ("observability", "adopt OpenTelemetry for traces and keep Prometheus for metrics",
     "drop the self-hosted Jaeger in favour of the managed tracing backend", "tracing"),
    ("the data warehouse", "load the warehouse nightly with dbt and Airflow",
     "move warehouse loads to hourly micro-batches", "warehouse loads"),
    ("the API versioning", "version the public API in the URL path (/v2/...)",
     "version the public API with a date header instead of the path", "API versioning"),
    ("on-call", "run on-call in weekly rotations of two engineers",
     "split on-call into a primary and a follow-the-sun secondary", "on-call rotation"),
    ("the frontend stack", "rewrite the settings pages in React with TypeScript",
     "freeze new React work until the design system lands", "settings pages"),
    ("the cloud budget", "cap the staging cloud spend at 4,000 EUR a month",
     "shut staging down at night to save on the cloud bill", "staging budget"),
    ("the hiring plan", "open two backend positions and one data engineer role",
     "pause backend hiring and convert one role to SRE", "hiring plan"),
    ("the database upgrade", "upgrade production Postgres to version 16 during the Easter freeze",
     "postpone the Postgres 17 upgrade until pgvector supports it", "database upgrade"),
    ("the authentication flow", "require passkeys for all admin accounts",
     "allow TOTP as a fallback when passkeys fail", "admin login"),
    ("the vendor contract", "renew the monitoring vendor contract for one year",
     "start a trial of a cheaper monitoring vendor", "monitoring vendor"),
]

UPDATED = [
    # (entity, property, old value, new value, old text, new text, question, namespace)
    ("staging database", "postgres_version", "14", "16",
     "The staging database runs PostgreSQL 14.",
     "Staging was upgraded over the weekend: the staging database now runs PostgreSQL 16.",
     "Which PostgreSQL version is the staging database on?"),
    ("weekly data sync", "schedule", "Tuesdays 10:00", "Thursdays 15:00",
     "The weekly sync with the data team is on Tuesdays at 10:00.",
     "Heads up: the weekly data-team sync moved to Thursdays at 15:00 from now on.",
     "When is the weekly meeting with the data team?"),
    ("checkout-api", "owner", "Lukas Keller", "Aiko Tanaka",
     "Lukas Keller owns the checkout-api service.",
     "Ownership of checkout-api passed from Lukas to Aiko Tanaka after the reorg.",
     "Who is responsible for the checkout-api service?"),
    ("payments on-call", "lead", "Priya Raman", "Diego Moreau",
     "Priya Raman leads the payments on-call rotation.",
     "Diego Moreau took over as payments on-call lead; Priya moved to the platform team.",
     "Who should I page first for a payments incident?"),
    ("primary region", "value", "eu-west-1", "eu-central-1",
     "Our primary cloud region is eu-west-1.",
     "The migration finished: our primary cloud region is now eu-central-1.",
     "In which cloud region do we primarily run?"),
    ("release branch", "name", "release/2026.02", "release/2026.05",
     "The active release branch is release/2026.02.",
     "We cut a new branch: the active release branch is now release/2026.05.",
     "What is the current release branch called?"),
    ("Node runtime", "version", "Node 18", "Node 22",
     "The frontend build runs on Node 18.",
     "The frontend build was bumped to Node 22 last sprint.",
     "Which Node version does the frontend build use?"),
    ("VPN endpoint", "host", "vpn1.acme.internal", "vpn.eu.acme.internal",
     "Connect to the office VPN at vpn1.acme.internal.",
     "The office VPN moved; use vpn.eu.acme.internal to connect now.",
     "What host do I use for the office VPN?"),
    ("standup", "time", "09:15", "09:45",
     "Daily standup starts at 09:15.",
     "Daily standup was pushed back to 09:45 so the Lisbon folks can join.",
     "At what time does the daily standup begin?"),
    ("Maya", "desk", "room 4.12", "room 2.07",
     "Maya sits in room 4.12 on the fourth floor.",
     "Maya moved desks; she is now in room 2.07 near the kitchen.",
     "Where can I find Maya's desk in the office?"),
    ("API rate limit", "value", "600 requests per minute", "1,200 requests per minute",
     "The public API rate limit is 600 requests per minute per key.",
     "We raised the public API rate limit to 1,200 requests per minute per key.",
     "How many requests per minute does a public API key get?"),
    ("error budget", "value", "99.9%", "99.95%",
     "The checkout SLO target is 99.9% availability.",
     "Leadership tightened the checkout SLO target to 99.95% availability.",
     "What availability target does the checkout SLO have?"),
    ("design review", "day", "Mondays", "Fridays",
     "Design reviews happen on Mondays after lunch.",
     "Design reviews are now held on Fridays after lunch.",
     "Which day are design reviews scheduled on?"),
    ("Kafka cluster", "broker_count", "3 brokers", "5 brokers",
     "The Kafka cluster has 3 brokers.",
     "We scaled the Kafka cluster out to 5 brokers.",
     "How many brokers does our Kafka cluster have?"),
    ("Tom", "role", "backend engineer", "engineering manager",
     "Tom works as a backend engineer on the platform team.",
     "Tom was promoted to engineering manager of the platform team.",
     "What is Tom's job on the platform team?"),
    ("orion dataset", "version", "orion-v3", "orion-v4",
     "Experiments use the orion-v3 training split.",
     "Experiments switched to the orion-v4 training split after the relabelling.",
     "Which training split do the orion experiments use?"),
    ("orion baseline", "accuracy", "71.2%", "74.8%",
     "The orion baseline model reaches 71.2% accuracy.",
     "With the new augmentation the orion baseline model reaches 74.8% accuracy.",
     "How accurate is the orion baseline model?"),
    ("gym", "schedule", "Monday and Wednesday evenings", "Tuesday and Saturday mornings",
     "I go to the gym on Monday and Wednesday evenings.",
     "New routine: gym on Tuesday and Saturday mornings instead.",
     "On which days do I work out?"),
    ("dentist", "name", "Dr. Almeida", "Dr. Fournier",
     "My dentist is Dr. Almeida on Rua Augusta.",
     "I changed dentists; I now see Dr. Fournier near the station.",
     "Who is my dentist?"),
    ("landlord", "phone", "+351 912 345 678", "+351 936 222 410",
     "The landlord's phone number is +351 912 345 678.",
     "The landlord has a new number: +351 936 222 410.",
     "How do I call the landlord?"),
    ("preferred airline", "value", "TAP", "Lufthansa",
     "Book flights with TAP when possible.",
     "Prefer Lufthansa for flights from now on, the TAP miles expired.",
     "Which airline should I book for trips?"),
    ("laptop", "model", "ThinkPad X1 Carbon", "MacBook Pro 14",
     "My work laptop is a ThinkPad X1 Carbon.",
     "IT replaced my work laptop with a MacBook Pro 14.",
     "What kind of computer do I use for work?"),
    ("deploy freeze", "window", "Friday 16:00 to Monday 08:00", "Thursday 18:00 to Monday 08:00",
     "Deploys are frozen from Friday 16:00 to Monday 08:00.",
     "The deploy freeze now starts earlier: Thursday 18:00 to Monday 08:00.",
     "When are we not allowed to ship to production?"),
    ("CI runner", "type", "self-hosted runners", "GitHub-hosted large runners",
     "CI jobs run on our self-hosted runners.",
     "CI jobs moved to GitHub-hosted large runners; the self-hosted ones are gone.",
     "Where do our continuous integration jobs execute?"),
    ("log retention", "days", "30 days", "90 days",
     "Application logs are kept for 30 days.",
     "Compliance asked us to keep application logs for 90 days.",
     "How long do we retain application logs?"),
    ("team lunch", "day", "Wednesday", "Friday",
     "Team lunch is every Wednesday.",
     "Team lunch moved to Fridays.",
     "What day is the team lunch?"),
    ("Sofia", "location", "Madrid", "Berlin",
     "Sofia Costa works remotely from Madrid.",
     "Sofia Costa relocated to Berlin last month.",
     "Which city is Sofia based in?"),
    ("feature flag service", "vendor", "LaunchDarkly", "the in-house feature-flags service",
     "Feature flags are managed in LaunchDarkly.",
     "We migrated feature flags off LaunchDarkly onto the in-house feature-flags service.",
     "What do we use to manage feature toggles?"),
    ("backup schedule", "time", "02:00 UTC", "04:30 UTC",
     "Database backups run nightly at 02:00 UTC.",
     "Nightly database backups were moved to 04:30 UTC to avoid the batch jobs.",
     "At what hour do the nightly DB backups start?"),
    ("Python version", "value", "Python 3.10", "Python 3.12",
     "Services are built on Python 3.10.",
     "All services were upgraded to Python 3.12.",
     "Which Python release do our services run?"),
]

CHITCHAT = [
    "Had coffee with {p} and talked about the football match last night.",
    "{p} said the weather in Lisbon has been great this week.",
    "Lunch was pizza again; {p} complained about the pineapple.",
    "{p} shared photos of their new puppy in the team channel.",
    "Small talk with {p} about weekend hiking plans.",
    "{p} recommended a podcast about space exploration.",
    "The office coffee machine is broken again, {p} noticed.",
    "{p} is reading a novel about a lighthouse keeper.",
    "Chatted with {p} about the new bakery down the street.",
    "{p} mentioned the train was late this morning.",
    "{p} asked whether anyone wants to join the board game night.",
    "Joked with {p} about the printer that never works.",
]

# (property, statement, paraphrased question or None)
PROJECT_FACTS = [
    ("stack", "{svc} is written in {lang} and deployed on {plat}.",
     "Which programming language was used to build {svc}?"),
    ("storage", "{svc} stores its state in {store} and is owned by {p}.",
     "Where does {svc} keep its data?"),
    ("dashboard", "The {svc} dashboard lives in Grafana under the {team} folder.", None),
    ("metrics", "{svc} exposes metrics on port {port} and health checks on /healthz.",
     "Which port should Prometheus scrape for {svc}?"),
    ("dependency", "{svc} depends on {svc2} for {purpose}.", None),
    ("runbook", "The runbook for {svc} is maintained by {p} in the {team} wiki.",
     "Who keeps the operations guide for {svc} up to date?"),
]
LANGS = ["Go", "Python", "Kotlin", "Rust", "TypeScript", "Java"]
PLATS = ["Kubernetes", "ECS", "Nomad", "bare VMs", "Cloud Run"]
STORES = ["Postgres", "Redis", "DynamoDB", "S3", "Cassandra", "SQLite"]
TEAMS = ["payments", "platform", "frontend", "data", "growth", "security"]
PURPOSES = ["authentication", "price lookups", "email delivery", "rate limiting", "audit trails", "geo data"]

DEPLOY = "Deploy of {svc} {ver} to {env} completed at {hh}:{mm} on {day}."
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
ENVS = ["production", "staging", "canary"]

APPOINTMENTS = "{p} has a {what} appointment on {day} at {hh}:00."
APPOINTMENT_KINDS = ["dentist", "doctor", "physiotherapy", "hairdresser", "bank", "visa", "optician"]

PEOPLE_ROLE = "{p} joined the {team} team as {role}; {pron} works from {city}."
ROLES = ["a senior backend engineer", "the SRE lead", "a data engineer", "a product designer",
         "a staff engineer", "the security champion", "an engineering manager", "a QA engineer"]
CITIES = ["Lisbon", "Berlin", "Warsaw", "Nairobi", "Osaka", "Toronto", "Porto", "Lagos", "Stockholm", "Austin"]

RESEARCH = [
    "Orion run {run}: learning rate {lr}, batch size {bs}, validation loss {loss}.",
    "Orion ablation {run} removed the {part} and lost {delta} points of accuracy.",
    "Idea for orion: try {idea} on the {part}.",
]
PARTS = ["attention pooling", "position encoding", "augmentation pipeline", "tokenizer", "label smoothing", "warmup"]
IDEAS = ["mixup", "curriculum sampling", "a cosine schedule", "distillation from the large model", "dropout 0.2"]


class Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.episodes: list[dict[str, Any]] = []
        self.facts: list[dict[str, Any]] = []
        self.questions: list[dict[str, Any]] = []

    def at(self, month: int | None = None) -> str:
        month = month if month is not None else self.rng.randint(1, 10)
        day = self.rng.randint(1, 28)
        when = datetime(YEAR, month, day, self.rng.randint(7, 19), self.rng.randint(0, 59), tzinfo=UTC)
        return when.isoformat().replace("+00:00", "Z")

    def episode(self, namespace: str, content: str, topic: str, *, occurred_at: str | None = None,
                kind: str = "observation") -> str:
        key = f"ep-{len(self.episodes) + 1:05d}"
        self.episodes.append({
            "key": key, "namespace": namespace, "content": content,
            "occurred_at": occurred_at or self.at(), "kind": kind, "topic": topic,
        })
        return key

    def fact(self, namespace: str, content: str, entity: str, prop: str, value: str, sources: list[str]) -> str:
        key = f"fact-{len(self.facts) + 1:04d}"
        self.facts.append({
            "key": key, "namespace": namespace, "content": content,
            "entity": entity, "property": prop, "value": value, "sources": sources,
        })
        return key

    def question(self, qtype: str, query: str, relevant: list[str], *, stale: list[str] | None = None,
                 namespaces: str = "/") -> None:
        self.questions.append({
            "id": "", "split": "", "type": qtype, "query": query, "namespaces": namespaces,
            "relevant": relevant, "stale": stale or [],
        })

    def person(self) -> str:
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"


def build(seed: int = SEED) -> Builder:
    rng = random.Random(seed)
    b = Builder(rng)
    people = sorted({f"{f} {last}" for f, last in zip(FIRST, rng.sample(LAST, len(LAST)), strict=True)})

    # -- preferences: every person x dimension gets a value; paraphrase + distractor questions
    pref_keys: list[tuple[str, int, str, str]] = []
    for person in people:
        first = person.split()[0]
        for dim, (statement, _question, values) in enumerate(PREFERENCES):
            if rng.random() < 0.7:
                value = rng.choice(values)
                key = b.episode(NS_PREFS, statement.format(p=first, v=value), "preference")
                pref_keys.append((first, dim, value, key))
    for first, dim, _value, key in rng.sample(pref_keys, 50):
        b.question("paraphrase", PREFERENCES[dim][1].format(p=first), [key], namespaces=NS_PREFS)

    # -- incidents with identifiers
    incident_ids = rng.sample(range(1000, 9999), 320)
    incidents: list[dict[str, Any]] = []
    for number in incident_ids:
        svc = rng.choice(SERVICES)
        major, minor, patch = rng.randint(1, 4), rng.randint(0, 30), rng.randint(0, 12)
        inc = {
            "id": f"INC-{number}", "svc": svc, "ver": f"v{major}.{minor}.{patch}",
            "err": rng.choice(ERRORS), "comp": rng.choice(COMPONENTS), "code": rng.choice(HTTP_CODES),
            "mins": rng.randint(3, 95), "ns": rng.choice(NS_WORK),
        }
        inc["key"] = b.episode(
            inc["ns"],
            f"{inc['id']}: {svc} returned {inc['code']} errors for {inc['mins']} minutes after the "
            f"{inc['ver']} rollout; root cause was {inc['err']} from {inc['comp']}.",
            "incident", kind="incident",
        )
        incidents.append(inc)
        # follow-up notes sharing the service and symptom, not the id: hard distractors for vectors
        if rng.random() < 0.35:
            b.episode(inc["ns"], f"Postmortem action item: add alerting on {inc['err']} for {svc} and "
                      f"review the retry policy towards {inc['comp']}.", "incident_followup")
    errors_seen: dict[str, list[str]] = {}
    versions_seen: dict[str, list[str]] = {}
    for inc in incidents:
        errors_seen.setdefault(inc["err"], []).append(inc["key"])
        versions_seen.setdefault(inc["ver"], []).append(inc["key"])
    for i, inc in enumerate(rng.sample(incidents, 45)):
        form = i % 3
        if form == 0:
            query = inc["id"]
        elif form == 1:
            query = f"What was the root cause of {inc['id']}?"
        else:
            query = f"How long did the outage in {inc['id']} last?"
        b.question("identifier", query, [inc["key"]])
    unique_versions = [(ver, keys[0]) for ver, keys in versions_seen.items() if len(keys) == 1]
    for ver, key in rng.sample(sorted(unique_versions), 15):
        b.question("identifier", f"Which incident happened after the {ver} rollout?", [key])

    # -- deploy logs: near-duplicates differing in service/env/day (distractors)
    deploy_index: dict[tuple[str, str, str], str] = {}
    for _ in range(260):
        svc, env, day = rng.choice(SERVICES), rng.choice(ENVS), rng.choice(DAYS)
        ver = f"v{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 12)}"
        key = b.episode(rng.choice(NS_WORK), DEPLOY.format(
            svc=svc, ver=ver, env=env, hh=f"{rng.randint(8, 20):02d}", mm=f"{rng.randint(0, 59):02d}", day=day),
            "deploy", kind="deploy_log")
        deploy_index.setdefault((svc, env, day), key)
        if (svc, env, day) in deploy_index and deploy_index[(svc, env, day)] != key:
            deploy_index[(svc, env, day)] = ""  # ambiguous: not usable for a question
    usable = sorted((k, v) for k, v in deploy_index.items() if v)
    for (svc, env, day), key in rng.sample(usable, 25):
        b.question("distractor", f"When did the {svc} deploy to {env} finish on {day}?", [key])

    # -- appointments: many people x kinds x days (distractors)
    appt_index: dict[tuple[str, str], list[str]] = {}
    for _ in range(170):
        first = rng.choice(FIRST)
        what, day = rng.choice(APPOINTMENT_KINDS), rng.choice(DAYS)
        key = b.episode(NS_PERSONAL, APPOINTMENTS.format(p=first, what=what, day=day, hh=rng.randint(8, 17)),
                        "appointment")
        appt_index.setdefault((first, what), []).append(key)
    usable_appts = sorted((k, v[0]) for k, v in appt_index.items() if len(v) == 1)
    for (first, what), key in rng.sample(usable_appts, 25):
        b.question("distractor", f"When is {first}'s {what} appointment?", [key], namespaces=NS_PERSONAL)

    # -- people joining teams
    for person in people:
        pron = rng.choice(["she", "he", "they"])
        b.episode(rng.choice(NS_WORK), PEOPLE_ROLE.format(
            p=person, team=rng.choice(TEAMS), role=rng.choice(ROLES), pron=pron, city=rng.choice(CITIES)), "people")

    # -- project facts about services (some become asserted facts)
    project_questions: list[tuple[str, list[str]]] = []
    for svc in SERVICES:
        ns = rng.choice(NS_WORK)  # a service's notes live in its team's namespace
        for prop, template, question in PROJECT_FACTS:
            others = [s for s in SERVICES if s != svc]
            text = template.format(
                svc=svc, lang=rng.choice(LANGS), plat=rng.choice(PLATS), store=rng.choice(STORES),
                p=rng.choice(people), team=rng.choice(TEAMS), port=rng.choice([9090, 9100, 8081, 9464]),
                svc2=rng.choice(others), purpose=rng.choice(PURPOSES))
            key = b.episode(ns, text, "project")
            relevant = [key]
            if rng.random() < 0.5:  # about half were also asserted as facts, citing the episode
                relevant.append(b.fact(ns, text, svc, prop, text, [key]))
            if question is not None:
                project_questions.append((question.format(svc=svc), relevant))
    for query, relevant in rng.sample(project_questions, 30):
        b.question("paraphrase", query, relevant)

    # -- dated decisions: one topic decided differently in two months (temporal questions)
    for topic, first_decision, second_decision, short in QUEUE_TOPICS:
        m1, m2 = sorted(rng.sample(range(len(MONTHS)), 2))
        ns = rng.choice(NS_WORK)
        k1 = b.episode(ns, f"In the {MONTHS[m1]} planning review we decided to {first_decision}.",
                       "decision", occurred_at=b.at(m1 + 1), kind="decision")
        k2 = b.episode(ns, f"Decision from the {MONTHS[m2]} review: {second_decision}.",
                       "decision", occurred_at=b.at(m2 + 1), kind="decision")
        # undated discussion of the same topic: a distractor for both
        b.episode(ns, f"Long discussion about {topic} today; no decision yet on the {short}.", "discussion")
        b.question("temporal", f"What did we decide about {topic} in {MONTHS[m1]}?", [k1])
        b.question("temporal", f"What was agreed on the {short} in {MONTHS[m2]}?", [k2])
    # monthly status notes: "what happened in <month>" style questions
    for month_index, month in enumerate(MONTHS):
        for svc in rng.sample(SERVICES, 3):
            b.episode(rng.choice(NS_WORK), f"{month} status for {svc}: migration {rng.randint(10, 100)}% done, "
                      f"{rng.randint(0, 6)} open bugs.", "status", occurred_at=b.at(month_index + 1))
        ns = rng.choice(NS_WORK)
        k = b.episode(ns, f"Retrospective for {month}: the team agreed to {rng.choice(RETRO_ACTIONS)}.",
                      "retro", occurred_at=b.at(month_index + 1), kind="decision")
        b.question("temporal", f"What did the team agree in the {month} retrospective?", [k])
        if month_index % 2 == 0:
            b.question("temporal", f"What came out of the retro in {month}?", [k])

    # -- updated values: old episode + newer correction; half also as superseding facts
    for index, (entity, prop, old, new, old_text, new_text, question) in enumerate(UPDATED):
        ns = NS_PERSONAL if index >= 17 and index <= 21 else (NS_RESEARCH if "orion" in entity else rng.choice(NS_WORK))
        old_month = rng.randint(1, 4)
        k_old = b.episode(ns, old_text, "updated_old", occurred_at=b.at(old_month))
        k_new = b.episode(ns, new_text, "updated_new", occurred_at=b.at(old_month + rng.randint(3, 6)))
        relevant, stale = [k_new], [k_old]
        if index % 2 == 0:
            f_old = b.fact(ns, old_text, entity, prop, old, [k_old])
            f_new = b.fact(ns, new_text, entity, prop, new, [k_new])
            relevant.append(f_new)
            stale.append(f_old)
        b.question("updated", question, relevant, stale=stale)
        # a second phrasing of the same question, keyword-leaning
        b.question("updated", f"current {entity} {prop.replace('_', ' ')}", relevant, stale=stale)

    # -- research notes
    for run in range(1, 120):
        template = rng.choice(RESEARCH)
        b.episode(NS_RESEARCH, template.format(
            run=f"R{run:03d}", lr=rng.choice(["1e-4", "3e-4", "5e-5", "1e-3"]), bs=rng.choice([32, 64, 128, 256]),
            loss=f"{rng.uniform(0.2, 1.4):.3f}", part=rng.choice(PARTS), delta=f"{rng.uniform(0.1, 4):.1f}",
            idea=rng.choice(IDEAS)), "research")

    # -- chit-chat filler until the episode count target
    while len(b.episodes) < 2300:
        b.episode(rng.choice([NS_PERSONAL, *NS_WORK]), rng.choice(CHITCHAT).format(p=rng.choice(FIRST)), "chitchat")

    # -- keyword-free questions (own generator, so the records above stay as they were):
    # incidents described by symptom and cause, deploys with informal names
    extra = random.Random(seed + 1)
    by_cause: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for inc in incidents:
        by_cause[(inc["svc"], inc["comp"])].append(inc)
    unique_causes = sorted((k, v[0]) for k, v in by_cause.items() if len(v) == 1)
    for (svc, comp), inc in extra.sample(unique_causes, 20):
        b.question("paraphrase", f"Which outage of the {svc.replace('-', ' ')} service was blamed on "
                   f"{COMPONENT_PARAPHRASE[comp]} ({ERROR_PARAPHRASE[inc['err']]})?", [inc["key"]])
    for (svc, env, day), key in extra.sample(usable, 16):
        b.question("distractor", f"what time did we finish shipping {svc.replace('-', ' ')} to "
                   f"{ENV_PARAPHRASE[env]} that {day}", [key])

    # ids and splits: alternate within each type so dev and test both hold every type
    counts: dict[str, int] = {}
    for number, q in enumerate(b.questions, start=1):
        q["id"] = f"q-{number:04d}"
        seen = counts.get(q["type"], 0)
        q["split"] = "dev" if seen % 2 == 0 else "test"
        counts[q["type"]] = seen + 1
    # shuffle episode insertion order so ids do not cluster by topic (keys stay stable)
    rng.shuffle(b.episodes)
    return b


RETRO_ACTIONS = [
    "write a postmortem within 48 hours of every incident",
    "stop merging on Fridays after 15:00",
    "pair on every database migration",
    "move the flaky end-to-end tests into a nightly job",
    "time-box design docs to one week",
    "rotate the release captain every sprint",
    "add a load test before each major launch",
    "archive stale feature flags every month",
    "keep the on-call handover notes in the wiki",
    "review cloud costs in the first week of each month",
]


# Values disjoint from everything a question asks about: distractors built from them can
# look like answers (same templates, same namespaces) but never are one.
DX_FIRST = ["Quentin", "Beatriz", "Anselm", "Noor", "Tariq", "Wilma", "Xavier", "Ylva", "Zainab", "Olek"]
DX_SERVICES = ["legacy-cron", "pdf-renderer", "sms-gateway", "tax-calculator", "cms-backend", "sitemap-builder"]
DX_ENVS = ["qa", "dev", "load-test"]
DX_APPOINTMENTS = ["vet", "tax advisor", "mechanic", "notary"]


def distractors(count: int, seed: int = SEED + 2) -> list[dict[str, Any]]:
    """``count`` extra episodes that answer no question (for ``retrieval_quality --large``).

    Same templates and namespaces as the labelled set, but with people, services,
    environments and appointment kinds that no question mentions, incident ids of five
    digits (questions use four), and no updated values or dated decisions.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    b = Builder(rng)
    for i in range(count):
        pick = i % 6
        if pick == 0:
            ns, text = rng.choice([NS_PERSONAL, *NS_WORK]), rng.choice(CHITCHAT).format(p=rng.choice(DX_FIRST))
        elif pick == 1:
            svc = rng.choice(DX_SERVICES)
            ns = rng.choice(NS_WORK)
            text = (f"INC-{rng.randint(10000, 99999)}: {svc} returned {rng.choice(HTTP_CODES)} errors for "
                    f"{rng.randint(3, 95)} minutes after the v{rng.randint(5, 9)}.{rng.randint(0, 30)}.0 rollout; "
                    f"root cause was {rng.choice(ERRORS)} from {rng.choice(COMPONENTS)}.")
        elif pick == 2:
            ns = rng.choice(NS_WORK)
            text = DEPLOY.format(svc=rng.choice(DX_SERVICES + SERVICES), ver=f"v{rng.randint(5, 9)}.0.{i}",
                                 env=rng.choice(DX_ENVS), hh=f"{rng.randint(8, 20):02d}",
                                 mm=f"{rng.randint(0, 59):02d}", day=rng.choice(DAYS))
        elif pick == 3:
            ns = NS_PERSONAL
            text = APPOINTMENTS.format(p=rng.choice(FIRST + DX_FIRST), what=rng.choice(DX_APPOINTMENTS),
                                       day=rng.choice(DAYS), hh=rng.randint(8, 17))
        elif pick == 4:
            ns = NS_PREFS
            statement, _question, values = rng.choice(PREFERENCES)
            text = statement.format(p=rng.choice(DX_FIRST), v=rng.choice(values))
        else:
            ns = NS_RESEARCH
            text = rng.choice(RESEARCH).format(
                run=f"X{i:05d}", lr=rng.choice(["2e-4", "7e-5"]), bs=rng.choice([48, 96]),
                loss=f"{rng.uniform(0.2, 1.4):.3f}", part=rng.choice(PARTS), delta=f"{rng.uniform(0.1, 4):.1f}",
                idea=rng.choice(IDEAS))
        out.append({"key": f"dx-{i + 1:06d}", "namespace": ns, "content": f"{text}", "occurred_at": b.at(),
                    "kind": "observation", "topic": "distractor"})
    return out


def write(builder: Builder, directory: Path = HERE) -> dict[str, int]:
    """Write the three JSONL files; returns their line counts."""
    sets = {"episodes": builder.episodes, "facts": builder.facts, "questions": builder.questions}
    jsonl.write_files({f"{name}.jsonl": rows for name, rows in sets.items()}, directory)
    return {name: len(rows) for name, rows in sets.items()}


def load(directory: Path = HERE) -> dict[str, list[dict[str, Any]]]:
    """Read the committed dataset: {"episodes": [...], "facts": [...], "questions": [...]}."""
    return jsonl.read_files({name: f"{name}.jsonl" for name in ("episodes", "facts", "questions")}, directory)


def main() -> None:
    counts = write(build())
    print(", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main()

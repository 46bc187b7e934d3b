"""`engram serve` as a newcomer meets it: where it listens, `/` leading to the control plane,
ENGRAM_HOST / ENGRAM_PORT, and one-line errors for a busy port or a mistyped provider."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from engram import __version__
from tests.conftest import RunningServer, free_port


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    return {**env, **extra}


def _run(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engram.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_log_says_where_the_server_and_the_control_plane_are(server: RunningServer) -> None:
    url = server.url
    assert f"Engram {__version__} listening on {url} — control plane {url}/ui/" in server.log()
    root = httpx.get(url + "/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "/ui/"
    assert "<html" in httpx.get(url + "/", follow_redirects=True).text.lower()


def test_a_port_in_use_is_one_line_and_exit_code_1(server: RunningServer) -> None:
    port = server.url.rsplit(":", 1)[1]
    # A database URL that cannot work: the port is checked before anything else starts.
    result = _run("serve", "--port", port, env=_env(ENGRAM_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in lines[0]
    assert "--port" in lines[0] and "ENGRAM_PORT" in lines[0]


def test_a_mistyped_provider_is_one_line_with_a_suggestion() -> None:
    result = _run("serve", "--port", str(free_port()), env=_env(ENGRAM_LLM_PROVIDER="opnai"))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "engram: unknown LLM provider 'opnai' (did you mean 'openai'?): set ENGRAM_LLM_PROVIDER to one of none, "
        "openai, openai-compatible, vllm, ollama, lmstudio, llamacpp, groq, openrouter, anthropic, gemini, local")
    bad_port = _run("serve", env=_env(ENGRAM_PORT="eighty"))
    assert bad_port.returncode == 1 and "ENGRAM_PORT='eighty' is not valid" in bad_port.stderr
    assert "Traceback" not in bad_port.stderr


def test_engram_port_is_honoured_by_serve_and_by_the_client(isolated_dsn: str) -> None:
    port = free_port()
    # A hosted provider with no key: the server starts, and says the key is missing.
    env = _env(ENGRAM_DATABASE_URL=isolated_dsn, ENGRAM_PORT=str(port), ENGRAM_LLM_PROVIDER="openrouter",
               ENGRAM_LLM_MODEL="some/model")
    process = subprocess.Popen([sys.executable, "-m", "engram.cli", "serve"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        banks = _run("banks", env=_env(ENGRAM_PORT=str(port)))
        assert banks.returncode == 0, banks.stderr
        assert "no banks yet" in banks.stderr
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert f"listening on http://127.0.0.1:{port}" in output
    assert "LLM provider 'openrouter' has no API key: set ENGRAM_LLM_API_KEY" in output


def test_a_database_that_cannot_be_reached_is_named_without_a_traceback() -> None:
    result = _run("serve", "--port", str(free_port()),
                  env=_env(ENGRAM_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    assert "cannot start: cannot connect to PostgreSQL at postgresql://nobody@127.0.0.1:1/none" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "engram: the server did not start (the reason is logged above)"

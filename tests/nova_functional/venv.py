"""The cached virtualenv the workers run in (standard library only: runs outside it).

`~/.cache/parasol/nova-functional-venv-<hash of requirements.txt>`, built aside and renamed
into place so an interrupted or concurrent build never leaves half a venv behind. The wheel
installs Nova's `etc/` under the venv's prefix while the tests read
`$pybasedir/etc/nova/api-paste.ini` (pybasedir = site-packages): a relative symlink
`site-packages/etc -> ../../../etc` makes it resolvable.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().with_name("requirements.txt")
# Bump when the layout built around the requirements changes (the etc/ link).
LAYOUT = b"layout-1\n"


def cache_root():
    return Path(os.environ.get("HOME", "/tmp")) / ".cache" / "parasol"


def venv_path():
    digest = hashlib.sha256(LAYOUT + REQUIREMENTS.read_bytes()).hexdigest()[:16]
    return cache_root() / f"nova-functional-venv-{digest}"


def python_of(venv):
    return venv / "bin" / "python"


def site_packages(venv):
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise RuntimeError(f"no site-packages under {venv}/lib")
    return found[0]


def ensure_venv(log=sys.stderr):
    """The venv for the pinned requirements, built (pip, about a minute) on first use."""
    venv = venv_path()
    if (venv / ".complete").exists():
        return venv
    cache_root().mkdir(parents=True, exist_ok=True)
    building = cache_root() / f"building-nf-{uuid.uuid4().hex}"
    python = os.environ.get("PARASOL_PYTHON", "python3")
    print(f"building {venv.name} (pip install -r {REQUIREMENTS})", file=log, flush=True)
    try:
        _run([python, "-m", "venv", str(building)])
        _run([str(building / "bin" / "pip"), "install", "--quiet",
              "--disable-pip-version-check", "-r", str(REQUIREMENTS)])
        link = site_packages(building) / "etc"
        if not link.exists():
            target = os.path.relpath(building / "etc", link.parent)
            os.symlink(target, link)
        if not (link / "nova" / "api-paste.ini").exists():
            raise RuntimeError(f"{link}/nova/api-paste.ini does not resolve")
        (building / ".complete").write_text("")
        try:
            building.rename(venv)
        except OSError:
            pass  # another run finished first; theirs is as good as ours
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    if not (venv / ".complete").exists():
        raise RuntimeError(f"virtualenv {venv} was not built")
    return venv


def _run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")

"""The cached virtualenv the workers run in (standard library only: runs outside it).

`~/.cache/parasol/nova-functional-venv-<hash of requirements.txt>`, built aside and renamed
into place so an interrupted or concurrent build never leaves half a venv behind. The wheel
installs Nova's `etc/` under the venv's prefix while the tests read
`$pybasedir/etc/nova/api-paste.ini` (pybasedir = site-packages): a relative symlink
`site-packages/etc -> ../../../etc` makes it resolvable. The notification sample tests read
Nova's `doc/notification_samples/*.json` from `site-packages/doc/`, which the wheel lacks:
they are taken from Nova's source distribution of the pinned version on PyPI (its sha256 as
the index gives it, checked).
"""

import hashlib
import io
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import urllib.request
import uuid
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().with_name("requirements.txt")
# Bump when the layout built around the requirements changes (the etc/ link, the samples).
LAYOUT = b"layout-2\n"
# PEP 503's simple index, as pip reads it (PIP_INDEX_URL if set).
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")


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
        add_notification_samples(site_packages(building))
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


def pinned_version(name):
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise RuntimeError(f"{REQUIREMENTS}: no {name}== pin")


def add_notification_samples(site):
    """`site/doc/notification_samples` from the pinned Nova's sdist on the index."""
    version = pinned_version("nova")
    sdist = f"nova-{version}.tar.gz"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    with urllib.request.urlopen(f"{INDEX}/nova/", context=context, timeout=60) as page:
        listing = page.read().decode()
    found = re.search(r'href="([^"#]*/' + re.escape(sdist) + r')#sha256=([0-9a-f]{64})"',
                      listing)
    if not found:
        raise RuntimeError(f"{INDEX}/nova/ lists no {sdist} with a sha256")
    url, digest = found.groups()
    with urllib.request.urlopen(url, context=context, timeout=300) as got:
        data = got.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise RuntimeError(f"{url}: sha256 is not the index's {digest}")
    prefix = f"nova-{version}/doc/notification_samples/"
    target = site / "doc" / "notification_samples"
    n = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            rel = member.name[len(prefix):] if member.name.startswith(prefix) else None
            if not rel or not member.isfile() or ".." in Path(rel).parts:
                continue
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tar.extractfile(member).read())
            n += 1
    if n == 0:
        raise RuntimeError(f"{sdist} has no {prefix}")


def _run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")

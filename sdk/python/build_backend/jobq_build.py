"""A PEP 517 build backend for this package that needs nothing but the standard library.

The library has no dependencies and is pure Python, so its wheel is a zip of ``src/jobq`` plus the
metadata from pyproject.toml's ``[project]`` table. Building in-tree means ``pip install ./sdk/python``
works where no package index is reachable (setuptools would also need ``wheel`` there).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "jobq"


def _project() -> Dict[str, str]:
    """Read the string keys of pyproject.toml's [project] table (all this package uses)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    if table is None:
        raise RuntimeError("pyproject.toml: no [project] table")
    return dict(re.findall(r'^([a-z-]+)\s*=\s*"([^"]*)"', table.group(1), re.M))


def _names() -> Tuple[str, str, str]:
    p = _project()
    dist = re.sub(r"[-_.]+", "_", p["name"])
    return p["name"], p["version"], f"{dist}-{p['version']}"


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '')}",
             "Classifier: Typing :: Typed"]
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as f:
            lines += ["Description-Content-Type: text/markdown", "", f.read()]
    return "\n".join(lines) + "\n"


def _sources() -> List[Tuple[str, str]]:
    out = []
    base = os.path.join(ROOT, "src")
    for folder, dirs, files in os.walk(os.path.join(base, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".typed")):
                path = os.path.join(folder, name)
                out.append((path, os.path.relpath(path, base).replace(os.sep, "/")))
    return out


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    _, _, stem = _names()
    info = f"{stem}.dist-info"
    files = files + [(f"{info}/METADATA", _metadata().encode()),
                     (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: jobq_build\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n")]
    record = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return wheel


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = []
    for path, arc in _sources():
        with open(path, "rb") as f:
            files.append((arc, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (os.path.join(ROOT, "src") + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    _, _, stem = _names()
    name = f"{stem}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "build_backend/jobq_build.py"]:
            if os.path.exists(os.path.join(ROOT, rel)):
                tar.add(os.path.join(ROOT, rel), f"{stem}/{rel}")
        for path, arc in _sources():
            tar.add(path, f"{stem}/src/{arc}")
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{stem}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name

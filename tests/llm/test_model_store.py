"""Model assembly: parts concatenated in order, size+sha256 verified, atomic, locked, refuses bad files."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from pathlib import Path

import pytest

from rlgpt.llm.errors import ModelIntegrityError, ModelPartsMissingError
from rlgpt.llm.model_store import (
    QWEN_CODER_0_5B,
    ModelSpec,
    default_model_dir,
    ensure_model,
    resolve_model_path,
)


def _make_parts(root: Path, prefix: str, chunks: list[bytes]) -> tuple[str, ...]:
    """Create importable part packages exposing get_part_path(), like the PyPI model parts."""
    names = []
    for i, chunk in enumerate(chunks, 1):
        pkg = root / f"{prefix}_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (pkg / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            "    here = os.path.dirname(os.path.abspath(__file__))\n"
            f"    return os.path.join(here, 'data', 'part{i:02d}.bin')\n"
        )
        names.append(pkg.name)
    return tuple(names)


@pytest.fixture
def tiny_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> ModelSpec:
    chunks = [os.urandom(3000), os.urandom(1), os.urandom(5000)]
    prefix = f"fakemodel_{request.node.name.replace('[', '_').replace(']', '_')}"
    modules = _make_parts(tmp_path / "site", prefix, chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    blob = b"".join(chunks)
    return ModelSpec(name="tiny", filename="tiny.gguf", part_modules=modules, size=len(blob),
                     sha256=hashlib.sha256(blob).hexdigest(), install_hint="pip install tiny-parts",
                     hf_repo="org/tiny")


def test_assembles_parts_in_order_and_verifies(tiny_spec: ModelSpec, tmp_path: Path) -> None:
    path = ensure_model(tiny_spec, tmp_path / "models")
    assert path == tmp_path / "models" / "tiny.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tiny_spec.sha256
    assert path.stat().st_mode & 0o777 == 0o644
    assert ensure_model(tiny_spec, tmp_path / "models") == path
    assert not list((tmp_path / "models").glob("*.partial"))


def test_wrong_checksum_is_refused_and_leaves_no_file(tiny_spec: ModelSpec, tmp_path: Path) -> None:
    bad = ModelSpec(**{**tiny_spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelIntegrityError, match="expected .* sha256 0000"):
        ensure_model(bad, tmp_path / "models")
    assert not (tmp_path / "models" / "tiny.gguf").exists()
    assert not list((tmp_path / "models").glob("*.partial"))


def test_corrupted_existing_file_is_refused(tiny_spec: ModelSpec, tmp_path: Path) -> None:
    path = ensure_model(tiny_spec, tmp_path / "models")
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError, match="delete it so it is reassembled"):
        ensure_model(tiny_spec, tmp_path / "models")


def test_missing_part_package_names_the_install_command(tmp_path: Path) -> None:
    spec = ModelSpec(name="ghost", filename="ghost.gguf", part_modules=("no_such_part_pkg_1",), size=1,
                     sha256="0" * 64, install_hint="pip install 'rlgpt[model]'", hf_repo="org/ghost")
    with pytest.raises(ModelPartsMissingError, match=r"no_such_part_pkg_1.*pip install 'rlgpt\[model\]'"):
        ensure_model(spec, tmp_path)


def _assemble_in_child(spec: ModelSpec, directory: str, site: str) -> str:
    import sys

    sys.path.insert(0, site)
    return str(ensure_model(spec, Path(directory)))


def test_concurrent_assembly_is_safe(tiny_spec: ModelSpec, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        args = (tiny_spec, str(tmp_path / "models"), str(tmp_path / "site"))
        paths = pool.starmap(_assemble_in_child, [args] * 3)
    assert len(set(paths)) == 1
    assert hashlib.sha256(Path(paths[0]).read_bytes()).hexdigest() == tiny_spec.sha256
    assert sorted(p.name for p in (tmp_path / "models").iterdir() if not p.name.startswith(".")) == [
        "tiny.gguf", "tiny.gguf.verified.json"]


def test_model_dir_env_and_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RLGPT_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_model_dir() == tmp_path / "xdg" / "rlgpt" / "models"
    monkeypatch.setenv("RLGPT_MODEL_DIR", str(tmp_path / "mine"))
    assert default_model_dir() == tmp_path / "mine"


def test_real_small_model_is_verified(small_model_path: Path) -> None:
    assert small_model_path.stat().st_size == QWEN_CODER_0_5B.size
    assert resolve_model_path(QWEN_CODER_0_5B.name, small_model_path.parent) == small_model_path

"""The set-up (scripts/bootstrap.sh): each command installs what it needs, the llama.cpp build
leaves out what the embedded server never loads, and its wheel cache follows its flags."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
SETUP_FILES = ("scripts/bootstrap.sh", "scripts/llama-cpp-lean.cmake", "pyproject.toml")


def bootstrap(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "REGEN_LLAMA_CMAKE_ARGS"}
    environment.update(env)
    return subprocess.run(
        ["bash", str(root / "scripts" / "bootstrap.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )


def build_info(root: Path = ROOT, **env: str) -> dict[str, str]:
    done = bootstrap(root, "--print-build", **env)
    assert done.returncode == 0, done.stderr
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


def checkout_copy(tmp_path: Path) -> Path:
    """The files the set-up reads, in a checkout of their own (no .venv yet)."""
    copy = tmp_path / "checkout"
    for name in SETUP_FILES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    return copy


def test_the_build_leaves_out_multimodal_and_common(tmp_path):
    args = build_info(XDG_CACHE_HOME=str(tmp_path))["cmake_args"].split()
    assert "-DLLAVA_BUILD=OFF" in args
    assert "-DGGML_NATIVE=OFF" in args  # still the portable baseline
    included = [a.split("=", 1)[1] for a in args if a.startswith("-DCMAKE_PROJECT_llama_cpp_")]
    assert included == [str(ROOT / "scripts" / "llama-cpp-lean.cmake")]
    assert "set(LLAMA_BUILD_COMMON OFF)" in Path(included[0]).read_text()


def test_the_wheel_folder_follows_the_flags_not_the_checkout(tmp_path):
    cache = str(tmp_path / "cache")
    default = build_info(XDG_CACHE_HOME=cache)["wheel_dir"]
    assert default.startswith(f"{cache}/regen/wheels/llama-cpp-python-0.3.36-")
    cuda = build_info(XDG_CACHE_HOME=cache, REGEN_LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON")
    assert cuda["wheel_dir"] != default
    assert "-DLLAVA_BUILD=OFF" in cuda["cmake_args"].split()  # lean whatever the flags

    copy = checkout_copy(tmp_path)
    assert build_info(copy, XDG_CACHE_HOME=cache)["wheel_dir"] == default
    lean = copy / "scripts" / "llama-cpp-lean.cmake"
    lean.write_text(lean.read_text() + "set(LLAMA_BUILD_TOOLS OFF)\n")
    assert build_info(copy, XDG_CACHE_HOME=cache)["wheel_dir"] != default


def venv_with_stamp(tmp_path: Path, level: str) -> Path:
    """A checkout whose .venv (a real one, without pip: any install attempt fails) is stamped
    as holding the `level` install of these very files."""
    copy = checkout_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(copy / ".venv")], check=True)
    key = build_info(copy, XDG_CACHE_HOME=str(tmp_path))["install_key"]
    (copy / ".venv" / ".regen-installed").write_text(f"{level} {key}")
    return copy


def test_the_demo_after_the_tests_installs_and_removes_nothing(tmp_path):
    copy = venv_with_stamp(tmp_path, "dev")
    for args in ((), ("--dev",)):
        done = bootstrap(copy, *args, XDG_CACHE_HOME=str(tmp_path))
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (copy / ".venv" / ".regen-installed").read_text().startswith("dev ")


def test_the_tests_after_the_demo_add_only_the_dev_layer(tmp_path):
    copy = venv_with_stamp(tmp_path, "demo")
    done = bootstrap(copy, XDG_CACHE_HOME=str(tmp_path))
    assert (done.returncode, done.stdout) == (0, "")
    done = bootstrap(copy, "--dev", XDG_CACHE_HOME=str(tmp_path))
    # It goes straight to the dev layer (and fails there: this venv has no pip), without
    # building or reinstalling the embedded model's wheel.
    assert done.returncode != 0
    assert "installing torch" in done.stdout
    assert "llama-cpp-python" not in done.stdout


def test_a_changed_project_file_reinstalls(tmp_path):
    copy = venv_with_stamp(tmp_path, "dev")
    with (copy / "pyproject.toml").open("a") as f:
        f.write("\n# changed\n")
    done = bootstrap(copy, XDG_CACHE_HOME=str(tmp_path))
    assert done.returncode != 0  # no pip in this venv: the reinstall was attempted
    assert "building llama-cpp-python" in done.stdout  # the wheel folder in tmp_path is empty
    # A failed build says so and where its whole log is.
    assert "building llama-cpp-python failed; the whole log: " in done.stderr
    log = Path(done.stderr.rsplit("the whole log: ", 1)[1].strip())
    assert log.is_file() and log.is_relative_to(tmp_path)


def test_make_demo_installs_the_demo_layer_and_make_test_the_rest():
    makefile = (ROOT / "Makefile").read_text()
    targets = dict(re.findall(r"^(\w+):\n\t(.*)$", makefile, re.M))
    assert targets["demo"] == "scripts/bootstrap.sh"
    assert targets["test"] == "scripts/bootstrap.sh --test"
    assert targets["bench"] == "scripts/bootstrap.sh --dev"


def test_the_installed_llama_cpp_holds_only_what_the_server_loads():
    """The wheel in this venv is the lean build: the libraries llama_cpp loads, not the
    multimodal one or llama.cpp's common library, and the server still imports."""
    import llama_cpp
    from llama_cpp.server.app import create_app

    assert callable(create_app)
    # llama-cpp-python installs its libraries in llama_cpp/lib, llama.cpp in site-packages/lib.
    package = Path(llama_cpp.__file__).parent
    found = [*(package / "lib").iterdir(), *(package.parent / "lib").glob("*.so*")]
    libs = {p.name.split(".so")[0] for p in found}
    assert {"libllama", "libggml", "libggml-base", "libggml-cpu"} <= libs, libs
    assert not {"libmtmd", "libllava", "libllama-common"} & libs, libs

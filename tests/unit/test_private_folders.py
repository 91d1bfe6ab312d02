"""What a served process loads back, from folders of its user's alone (issue 57): torch unpickles what activate()
loads into Inductor's cache (graphs, Dynamo's profile under the recorded job id), and torch's default cache folder
is ``torchinductor_<user>`` in the shared temp folder, which any local user can create first. deactivate() gives
back what activate() changed."""

import os
import re
import warnings

import pytest

from aotpack.runtime import _aotpack_folders
from aotpack.runtime import _aotpack_inductor as inductor

from .test_inductor_cache import install_fake_torch, write_set


@pytest.fixture
def fake_torch(monkeypatch, tmp_path):
    return lambda **kw: install_fake_torch(monkeypatch, tmp_path, **kw)


def default(tmp_path):
    return tmp_path / "torchinductor_me"


def test_a_default_folder_not_there_yet_is_made_this_user_s_alone_and_used(fake_torch, tmp_path):
    torch = fake_torch()
    write_set(tmp_path / "sets")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inductor.serve(str(tmp_path / "sets")) == []
    assert torch.loaded == [b"graphs"] and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert oct(default(tmp_path).stat().st_mode & 0o777) == "0o700"
    assert torch.compiler.config.job_id == "aotpack"
    inductor.reset()  # deactivate(): the job id given back
    assert torch.compiler.config.job_id is None
    inductor.serve(str(tmp_path / "sets"))  # activated again: loaded already, the job id taken again
    assert torch.compiler.config.job_id == "aotpack" and torch.loaded == [b"graphs"]


@pytest.mark.parametrize("asked", [False, True])
@pytest.mark.parametrize("plant", ["another owner", "writable by others", "a link of another's", "a file"])
def test_a_default_folder_another_user_could_have_planted_is_not_used(fake_torch, tmp_path, monkeypatch, plant, asked):
    torch = fake_torch()
    write_set(tmp_path / "sets")
    folder = default(tmp_path)
    if plant == "a file":
        folder.write_text("")
    elif plant == "a link of another's":
        (tmp_path / "theirs").mkdir(mode=0o755)
        folder.symlink_to(tmp_path / "theirs")
    else:
        folder.mkdir(mode=0o755)
        if plant == "writable by others":
            folder.chmod(0o777)
    if plant in ("another owner", "a link of another's"):
        if os.getuid() == 0:
            os.lchown(folder, 4242, -1)
        else:  # simulated: this process is another user than the one who made it
            me = os.getuid()
            monkeypatch.setattr(os, "getuid", lambda: me + 1)
    if asked:  # torch looked for its cache before activate(): its cache_dir() wrote the default into the variable
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    said = {"another owner": "another user (uid", "writable by others": "other users can write it (mode 777)",
            "a link of another's": "it is a link another user", "a file": "it is not a folder"}[plant]  # fmt: skip
    with pytest.warns(RuntimeWarning, match=re.escape(said)):
        assert inductor.serve(str(tmp_path / "sets")) == []
    private = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert os.path.basename(private).startswith("torchinductor_aotpack_") and private != str(folder)
    assert oct(os.stat(private).st_mode & 0o777) == "0o700" and torch.loaded == [b"graphs"]
    inductor.reset()  # deactivate(): the program's environment as it was
    _aotpack_folders.reset()
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == (str(folder) if asked else None)
    assert torch.compiler.config.job_id is None


def test_a_cache_folder_the_program_named_that_others_can_write_gets_no_recorded_caches(
    fake_torch, tmp_path, monkeypatch
):
    torch = fake_torch()
    write_set(tmp_path / "sets")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(shared))
    with pytest.warns(RuntimeWarning, match="is not this user's alone: other users can write it"):
        (why,) = inductor.serve(str(tmp_path / "sets"))
    assert "not loaded" in why and torch.loaded == [] and torch.compiler.config.job_id is None
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(shared)  # the program's choice, left as it is
    shared.chmod(0o700)
    assert inductor.serve(str(tmp_path / "sets")) == [] and torch.loaded == [b"graphs"]


def test_not_private_makes_a_missing_folder_and_reads_nothing_else(tmp_path):
    assert _aotpack_folders.not_private(str(tmp_path / "a" / "b")) is None
    assert oct((tmp_path / "a" / "b").stat().st_mode & 0o777) == "0o700"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "a link to nothing readable" in str(_aotpack_folders.not_private(str(tmp_path / "dangling")))

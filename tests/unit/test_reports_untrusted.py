"""Reports are untrusted input (issue 57): ``aotpack record --report`` merges what other processes, often on other
machines, wrote. A report names written-out sources only as activate() names them (by their text's hash), is
the user's own and writable by no one else, as its folder is, is read once through the descriptor checked, and
is of the recipe's package; anything else is a located error, and nothing is written (sentinel files checked)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from aotpack.commands import cli
from aotpack.errors import RecordError
from aotpack.record import misses
from aotpack.runtime._aotpack_source import source_name

from .test_record_merge import ADD, event

PACKAGE = "recorded_kernels"


def report(tmp_path, compilations=(), package=PACKAGE, name="rep.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"format": "aotpack-report/1", "package": package, "class_misses": [],
                                "compilations": list(compilations)}))  # fmt: skip
    path.chmod(0o644)
    return path


def as_activate_writes(source=None, text=ADD):
    """A compile event as activate() reports it: its written-out source named by its text's hash, or ``source``."""
    e = {**event(), "number": 0}
    name = source_name(text) if source is None else source
    e["function"] = {**e["function"], "source": name, "identity": "i"}
    e["sources"] = {name: text}
    return e


@pytest.fixture
def home(tmp_path):
    """A recipe's folder with a sentinel file above it and one of the user's elsewhere."""
    recipe_dir = tmp_path / "proj" / "recipes"
    (recipe_dir / "kernels").mkdir(parents=True)
    (tmp_path / "proj" / "sentinel.py").write_text("kept\n")
    (tmp_path / "mine.txt").write_text("the user's own\n")
    return recipe_dir


def untouched(tmp_path, home):
    assert (tmp_path / "proj" / "sentinel.py").read_text() == "kept\n"
    assert (tmp_path / "mine.txt").read_text() == "the user's own\n"
    assert not (home / "r.yaml").exists() and list((home / "kernels").iterdir()) == []


@pytest.mark.parametrize(
    "source",
    ["{tmp}/mine.txt", "../../sentinel.py", "../sentinel.py", "kernels/../../x.py", "add_copy.py", ".hidden.py",
     "0123456789abcdef.py", "0123456789ABCDEF.py", "a\x1b[2Jb.py", "x\x00.py", "nested/0123456789abcdef.py", ""],
)  # fmt: skip
def test_a_report_naming_a_source_activate_would_not_is_refused_and_nothing_written(tmp_path, home, source, capsys):
    source = source.format(tmp=tmp_path)
    path = report(tmp_path, [as_activate_writes(source, "import os\nos.system('echo planted')\n")])
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) != 0
    err = capsys.readouterr().err
    assert str(path) in err and "not a report aotpack wrote" in err
    untouched(tmp_path, home)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"qualname": "../../x"}, "a function's qualified name is not Python's: '../../x'"),
        ({"qualname": "k\x1b[2J"}, "a function's qualified name is not Python's"),
        ({"qualname": "outer.<locals>.k", "name": "../x"}, "a function's name is not an identifier: '../x'"),
        ({"module": "../../m"}, "a function's module is not a module's name"),
        ({"module": ""}, "a function's module is not a module's name"),
    ],
)
def test_a_report_naming_a_function_python_could_not_is_refused_and_nothing_written(tmp_path, home, change, says,
                                                                                  capsys):  # fmt: skip
    planted = as_activate_writes()
    planted["function"] = {**planted["function"], **change}
    path = report(tmp_path, [planted])
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) == 7
    err = capsys.readouterr().err
    assert str(path) in err and says.replace("\x1b", "\\x1b") in err, err
    untouched(tmp_path, home)


def test_a_report_of_a_triton_aotpack_is_not_tested_with_is_refused(tmp_path, home, capsys):
    path = report(tmp_path, [{"event": "triton", "version": "9.9.9"}, as_activate_writes()])
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) == 7
    assert "Triton 9.9.9 is not a release aotpack is tested with" in capsys.readouterr().err
    untouched(tmp_path, home)


def test_a_source_named_by_another_text_s_hash_is_refused(tmp_path, home):
    planted = as_activate_writes()
    planted["sources"] = {source_name(ADD): "import os  # not the text its name hashes to\n"}
    with pytest.raises(RecordError, match="not its text's hash"):
        misses.read_reports([report(tmp_path, [planted])])


def test_a_report_as_activate_writes_it_is_merged(tmp_path, home, capsys):
    path = report(tmp_path, [as_activate_writes()])
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) == 0
    assert [p.name for p in (home / "kernels").iterdir()] == [source_name(ADD)]
    assert "1 compilation reported" in capsys.readouterr().out


def test_a_report_of_another_package_is_refused(tmp_path, home, capsys):
    path = report(tmp_path, [as_activate_writes()], package="someone_elses")
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) != 0
    assert "a report of package 'someone_elses', not of the recipe's 'recorded_kernels'" in capsys.readouterr().err
    untouched(tmp_path, home)


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_report_another_user_owns_is_refused(tmp_path, monkeypatch, where):
    folder = tmp_path / "reports"
    folder.mkdir(mode=0o755)
    path = report(folder)
    if os.getuid() == 0:  # root: the file or folder given to another account
        os.chown(path if where == "file" else folder, 4242, -1)
    else:  # simulated: this process is another user than the one who made them (ownership is all that is read)
        monkeypatch.setattr(os, "getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(RecordError, match=r"another user \(uid \d+\) owns it \(a report( folder)?\); reports are read"):
        misses.read_reports([folder])


@pytest.mark.parametrize(("where", "mode"), [("file", 0o666), ("file", 0o646), ("file", 0o664), ("folder", 0o777),
                                             ("folder", 0o775)])  # fmt: skip
def test_a_report_others_can_write_is_refused(tmp_path, where, mode):
    folder = tmp_path / "reports"
    folder.mkdir()
    path = report(folder)
    (path if where == "file" else folder).chmod(mode)
    with pytest.raises(RecordError, match=f"other users can write it \\(mode {mode:o}\\) \\(a report( folder)?\\)"):
        misses.read_reports([folder])


def test_a_sticky_shared_folder_of_the_user_s_own_is_read(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    report(folder)
    folder.chmod(0o1777)
    assert misses.read_reports([folder]).compilations == []


def test_links_fifos_and_devices_in_a_report_folder_are_refused_without_blocking(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    target = report(tmp_path, name="elsewhere.json")
    (folder / "link.json").symlink_to(target)
    with pytest.raises(RecordError, match=r"link\.json: cannot be read as a report: a link"):
        misses.read_reports([folder])
    (folder / "link.json").unlink()
    os.mkfifo(folder / "fifo.json")
    with pytest.raises(RecordError, match=r"fifo\.json: cannot be read as a report: a FIFO, not a regular file"):
        misses.read_reports([folder])  # (no writer: a plain open would wait for ever)
    (folder / "fifo.json").unlink()
    if os.path.exists("/dev/zero"):
        with pytest.raises(RecordError, match="not a regular file"):
            misses.read_reports([Path("/dev/zero")])


def test_a_report_swapped_after_its_check_is_read_as_checked(tmp_path, monkeypatch):
    """The file is opened once: what is checked (owner, mode, regular) is what is read, whatever the path names
    afterwards."""
    folder = tmp_path / "reports"
    folder.mkdir()
    path = report(folder)
    real_fdopen = os.fdopen

    def swapped(fd, *args, **kwargs):
        os.replace(path, tmp_path / "gone.json")
        shutil.copy(tmp_path / "gone.json", path)
        path.write_text("{not json")  # the path now names another file
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", swapped)
    assert misses.read_reports([folder]).misses == []


def test_a_report_whose_compilations_record_nothing_says_why_and_writes_nothing(tmp_path, home, capsys):
    """Events that read but record nothing (compiled outside the JIT, a skipped hook): each said, escaped, and an
    error, not an empty recipe."""
    path = report(tmp_path, [{"event": "compiled", "name": "k\x1b[2J"}, {"event": "skipped", "function": "m:f",
                                                                          "why": "its hook failed"}])  # fmt: skip
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) == 7
    err = capsys.readouterr().err
    assert "not recorded: k\\x1b[2J: Triton compiled it outside its JIT" in err and "\x1b" not in err
    assert "not recorded: m:f: its hook failed" in err
    assert "--report: none of the 2 reported events is a compilation aotpack records (k\\x1b[2J: " in err
    untouched(tmp_path, home)


def test_reports_that_hold_nothing_say_so(tmp_path, home, capsys):
    """An empty report folder (no served process wrote one there), or reports with no miss and no compilation:
    exit 0, saying what was read and that nothing is added (issue 60: it said nothing)."""
    (tmp_path / "empty").mkdir()
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(tmp_path / "empty")]) == 0
    err = capsys.readouterr().err
    assert "0 reports, with no class miss and no compilation: nothing to add to" in err
    assert "at its exit into the folder AOTPACK_REPORT names" in err
    path = report(tmp_path)
    assert cli.main(["record", "-o", str(home / "r.yaml"), "--report", str(path)]) == 0
    assert "1 report, with no class miss and no compilation: nothing to add" in capsys.readouterr().err
    untouched(tmp_path, home)

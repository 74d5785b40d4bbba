"""Atomic outputs: a write that fails or is killed half-way leaves the previous file as it was (platform files,
CSVs, figures), never a truncated or empty one, and no temporary file behind when it fails."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from annette_torch import atomic
from annette_torch.atomic import atomic_write, write_text
from annette_torch.models import Roofline
from annette_torch.platform import Platform


def _platform(description: str = "") -> Platform:
    return Platform("syn", {"Base": Roofline(op_s=50e9, bandwidth=80e9, bit_act=32, bit_weights=32)},
                    description=description)


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_failing_write_leaves_the_old_file_and_no_temporary(tmp_path):
    f = tmp_path / "out.csv"
    f.write_text("old\n")
    os.chmod(f, 0o640)
    with pytest.raises(RuntimeError):
        with atomic_write(f, "w") as h:
            h.write("new, half written")
            raise RuntimeError("disk on fire")
    assert f.read_text() == "old\n" and _leftovers(tmp_path) == []
    write_text(f, "new\n")
    assert f.read_text() == "new\n" and stat.S_IMODE(f.stat().st_mode) == 0o640  # permissions kept
    with atomic_write(tmp_path / "b.bin", "wb") as h:
        h.write(b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    link = tmp_path / "link.csv"
    link.symlink_to(f)
    write_text(link, "through the link\n")
    assert link.is_symlink() and f.read_text() == "through the link\n"


def test_platform_save_failing_mid_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    _platform("old").save(path)
    old = path.read_bytes()

    def fail(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", fail)  # the data is written, the disk gives up before the rename
    with pytest.raises(OSError, match="No space left"):
        _platform("new" * 1000).save(path)
    assert path.read_bytes() == old and _leftovers(tmp_path) == []
    monkeypatch.undo()
    _platform("new").save(path)
    assert Platform.load(path).description == "new"


@pytest.mark.slow
def test_platform_save_killed_mid_write_leaves_the_old_file(tmp_path):
    """A real SIGKILL while a large platform file is being written: the old file is intact."""
    path = tmp_path / "p.json"
    _platform("old").save(path)
    old = path.read_bytes()
    for size in (48, 128, 256):  # MB of description: a save long enough to be caught in the act
        code = ("import sys; from annette_torch.models import Roofline; from annette_torch.platform import Platform\n"
                "p = Platform('syn', {'Base': Roofline(op_s=5e10, bandwidth=8e10, bit_act=32, bit_weights=32)}, "
                f"description='x' * ({size} * 2**20))\n"
                "print('saving', flush=True)\n"
                f"p.save({str(path)!r})\n")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "saving"
        caught = False
        deadline = time.time() + 60
        while proc.poll() is None and time.time() < deadline:
            if _leftovers(tmp_path):  # the temporary file exists: the save is under way
                os.kill(proc.pid, signal.SIGKILL)
                caught = True
                break
            time.sleep(0.0005)
        proc.wait()
        if caught:
            break
        assert path.read_bytes() != old  # finished before it could be killed: try a larger file
        _platform("old").save(path)
    assert caught, "the save was never caught in the act"
    assert path.read_bytes() == old
    assert Platform.load(path).description == "old"


def test_figure_save_failing_leaves_the_old_png(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from annette_torch.plots import _figure, _save
    out = tmp_path / "f.png"
    fig = _figure((2, 2))
    _save(fig, out)
    old = out.read_bytes()
    real = Figure.savefig

    def half(self, fname, **kw):
        fname.write(b"\x89PNG half")
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(Figure, "savefig", half)
    with pytest.raises(RuntimeError):
        _save(fig, out)
    assert out.read_bytes() == old and _leftovers(tmp_path) == []
    monkeypatch.setattr(Figure, "savefig", real)


def test_estimate_csv_and_cli_csv_are_written_whole(tmp_path, monkeypatch):
    from annette_torch import estimate
    from annette_torch.ir import LayerType as T, NetworkBuilder
    b = NetworkBuilder("n")
    x = b.input("x", (1, 3, 16, 16))
    b.same(T.RELU, "relu", b.conv("conv", x, 8, 3, padding=1))
    est = estimate(b.build(), "ort-cpu")
    out = tmp_path / "e.csv"
    out.write_text("old\n")
    monkeypatch.setattr(atomic.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(13, "Permission denied")))
    with pytest.raises(OSError):
        est.to_csv(out)
    assert out.read_text() == "old\n" and _leftovers(tmp_path) == []
    monkeypatch.undo()
    est.to_csv(out)
    assert out.read_text().startswith("name,")


def test_devices_and_pipes_are_written_in_place_not_replaced(tmp_path):
    import threading

    write_text("/dev/null", "nothing")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_text(fifo, "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_new_file_gets_the_umask_permissions_and_the_umask_is_untouched(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "new.txt", "x")
        assert os.stat(tmp_path / "new.txt").st_mode & 0o777 == 0o640
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(old)

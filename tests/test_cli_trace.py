"""`wafer trace` through the installed script: it records the demo on a rectangle, writes
trace-event JSON and says how to open it; bad arguments give one line and exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frontend import cli

# the installed console script beside this Python, else the module (the same main)
SCRIPT = Path(sys.executable).with_name("wafer")
WAFER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "frontend.cli"]


def wafer(*args, timeout=180):
    return subprocess.run([*WAFER, *args], capture_output=True, text=True, timeout=timeout)


def test_trace_writes_json_of_the_rect(tmp_path):
    out = tmp_path / "t.json"
    proc = wafer("trace", "--grid", "2x3", "--n", "8", "--rect", "0,1,2,2", "--links",
                 "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "exact match" in proc.stdout and "ui.perfetto.dev" in proc.stdout
    assert str(out.resolve()) in proc.stdout
    doc = json.loads(out.read_text())
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    # pid = 1 + row * 3 + col: the PEs of rows 0-1, columns 1-2 only
    assert {e["pid"] for e in events} == {2, 3, 5, 6}
    assert {e["cat"] for e in events} == {"task", "activity", "op", "link"}
    assert doc["otherData"]["rect"] == [0, 1, 2, 2]
    end = doc["otherData"]["end_cycle"]
    assert f"cycles 0..{end}" in proc.stdout
    # column 0, outside the rect, ends last (it receives the sum of the row)
    assert 0 < max(e["ts"] + e["dur"] for e in events) <= end


def test_bad_rect_through_the_script():
    proc = wafer("trace", "--rect", "1,2", timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "rect must be ROW,COL,ROWS,COLS" in lines[0], proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--grid", "2x3", "--rect", "0,1,2,3"], "--rect 0,1,2,3 reaches outside the 2x3 grid"),
    (["--rect", "0,0,0,2"], "ROWS, COLS >= 1"),
    (["--rect", "a,b,c,d"], "rect must be ROW,COL,ROWS,COLS"),
    (["--grid", "4x1"], "at least 2 columns"),
    (["--max-cycles", "0"], "--max-cycles must be >= 1"),
])
def test_bad_arguments_give_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["trace", *args])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines

"""`annette bench` rejects non-positive --timeout, --threads and -n with one error line (exit 2)."""

from __future__ import annotations

import pytest

from annette_torch.cli.app import main

BASE = ["bench", "-p", "ort-cpu", "-s", "conv"]


@pytest.mark.parametrize("extra, option", [
    (["--timeout", "0"], "--timeout"),
    (["--timeout", "-5"], "--timeout"),
    (["--timeout", "nan"], "--timeout"),
    (["--timeout", "abc"], "--timeout"),
    (["--threads", "0"], "--threads"),
    (["--threads", "-1"], "--threads"),
    (["--threads", "1.5"], "--threads"),
    (["-n", "0"], "-n/--configs"),
    (["-n", "-3"], "-n/--configs"),
])
def test_bad_value_is_one_error_line(extra: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(BASE + extra)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert option in err[0] and "Traceback" not in err[0]


def test_good_values_parse() -> None:
    from annette_torch.cli.app import build_parser
    args = build_parser().parse_args(BASE + ["--timeout", "0.5", "--threads", "2", "-n", "1"])
    assert (args.timeout, args.threads, args.configs) == (0.5, 2, 1)
    defaults = build_parser().parse_args(BASE)
    assert defaults.configs is None and defaults.threads == 1 and defaults.timeout == 120.0

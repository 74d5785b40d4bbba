"""A mistyped option, sub-command or choice is one error line with a "did you mean" (difflib)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from annette_torch.cli.app import build_parser, main
from annette_torch.cli.hints import explain


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert out == "", out  # nothing ran
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("annette: error: ") and "Traceback" not in err, err
    return code, lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["estimate", "resnet18", "--platfrom", "zcu102-dnndk"], "unknown option --platfrom; did you mean --platform?"),
    (["estimate", "--platfrom", "zcu102-dnndk", "resnet18"], "unknown option --platfrom; did you mean --platform?"),
    (["estimate", "resnet18", "--platfrom=zcu102"], "unknown option --platfrom; did you mean --platform?"),
    (["estimate", "resnet18", "--per-layr"], "unknown option --per-layr; did you mean --per-layer?"),
    (["estimate", "resnet18", "--Platform", "zcu102-dnndk"], "unknown option --Platform; did you mean --platform?"),
    # a required option missing because it was mistyped: the typo is the news, not the missing option
    (["adapt", "--platfrom", "zcu102-dnndk"], "unknown option --platfrom; did you mean --platform?"),
    (["bench", "export", "--ot", "x.csv"], "unknown option --ot; did you mean --out?"),
    (["bench", "-p", "export", "--lst"], "unknown option --lst; did you mean --list?"),  # -p's value, not ACTION
    (["estmate", "resnet18"], "unknown command 'estmate'; did you mean 'estimate'?"),
    (["platfroms"], "unknown command 'platfroms'; did you mean 'platforms'?"),
    (["ESTIMATE"], "unknown command 'ESTIMATE'; did you mean 'estimate'?"),
    (["bench", "exprt"], "unknown command 'exprt'; did you mean 'export'?"),
    (["pareto", "--space", "nb2O1"], "argument --space: invalid choice 'nb2O1'; did you mean 'nb201'?"),
])
def test_did_you_mean(capsys, argv, expected):
    code, line = run(capsys, *argv)
    assert code == 2
    assert line.startswith(f"annette: error: {expected} (see 'annette ")


def test_no_close_match_lists_the_choices_or_names_the_option(capsys):
    _, line = run(capsys, "frobnicate")
    assert "unknown command 'frobnicate' (choose from estimate, platforms, bench" in line and "did you" not in line
    _, line = run(capsys, "estimate", "resnet18", "--zzzzzz")
    assert "unknown option --zzzzzz (see 'annette estimate --help')" in line


def test_other_errors_keep_argparse_message(capsys):
    _, line = run(capsys, "estimate", "resnet18", "-p")
    assert "argument -p/--platform: expected one argument" in line
    _, line = run(capsys, "estimate")
    assert "the following arguments are required: MODEL" in line


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path of sub-command names, parser) for every parser of the CLI."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _subcommands(child, path + (name,))


def _transposed(option: str) -> str:
    """``--platform`` -> ``--paltform``: two different letters near the middle swapped."""
    body = option[2:]
    mid = len(body) // 2 - 1
    i = min((j for j in range(len(body) - 1) if body[j] != body[j + 1]), key=lambda j: abs(j - mid))
    return "--" + body[:i] + body[i + 1] + body[i] + body[i + 2:]


CASES = [(path, opt) for path, p in _subcommands(build_parser()) if path
         for opt in p._option_string_actions if opt.startswith("--") and len(opt) > 5 and opt != "--help"]


@pytest.mark.parametrize("path, option", CASES, ids=[f"{' '.join(p)} {o}" for p, o in CASES])
def test_every_long_option_of_every_command_is_suggested_back(capsys, path, option):
    typo = _transposed(option)
    parser = dict(_subcommands(build_parser()))[path]
    assert not any(k.startswith(typo) for k in parser._option_string_actions), typo  # a real typo
    code, line = run(capsys, *path, typo)
    assert code == 2
    assert f"unknown option {typo}; did you mean {option}?" in line


@given(st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz-"), min_size=1, max_size=14))
@settings(max_examples=60, deadline=None)
def test_random_unknown_options_are_one_line(word):
    opt = "--" + word
    parser = dict(_subcommands(build_parser()))[("estimate",)]
    assume(not any(k.startswith(opt) for k in parser._option_string_actions))
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["estimate", "tiny_cnn", opt])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"annette: error: unknown option {opt}")


def test_explain_leaves_unrelated_messages_alone():
    p = build_parser()
    assert explain("something else", p, ["platforms"]) == ("something else", None)
    text, _ = explain("argument X: invalid choice: 'b' (choose from 'a')", p, None)
    assert text == "argument X: invalid choice 'b' (choose from a)"

""""Did you mean" for command lines argparse rejects: a mistyped option (``--platfrom``), sub-command
(``estmate``) or choice (``--space nb2O1``) is named in one line with its closest spelling (difflib), since
argparse in the Pythons we support has no ``suggest_on_error``."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Sequence

__all__ = ["explain"]

#: the metavars of the sub-command arguments (annette COMMAND, annette bench ACTION)
COMMAND_METAVARS = ("COMMAND", "ACTION")


def _closest(word: str, candidates: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if not found:  # case slips (--Platform, ESTIMATE) score low on long words: compare case-folded too
        folded = {c.lower(): c for c in candidates}
        found = [folded[f] for f in difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)]
    return found[0] if found else None


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _options_taking_values(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions if a.option_strings and a.nargs != 0 for s in a.option_strings}


def _segments(root: argparse.ArgumentParser, argv: Sequence[str]) -> list[tuple[argparse.ArgumentParser, list[str]]]:
    """``argv`` cut at its sub-commands: (parser, the tokens that parser reads) for the root and each sub-command
    given (``bench export --out x`` -> [(annette, []), (bench, []), (export, ['--out', 'x'])])."""
    out: list[tuple[argparse.ArgumentParser, list[str]]] = [(root, [])]
    parser, takes_value = root, _options_taking_values(root)
    skip = False
    for i, tok in enumerate(argv):
        if tok == "--":
            out[-1][1].extend(argv[i:])
            break
        sub = _subparsers(parser)
        if not skip and sub is not None and not tok.startswith("-") and tok in sub.choices:
            parser = sub.choices[tok]
            takes_value = _options_taking_values(parser)
            out.append((parser, []))
            continue
        out[-1][1].append(tok)
        skip = tok in takes_value  # the next token is this option's value, not a sub-command
    return out


def _unknown_option(parser: argparse.ArgumentParser, tokens: Sequence[str]) -> str | None:
    """The first option-like token ``parser`` does not know (argparse's unambiguous prefixes count as known)."""
    known = list(parser._option_string_actions)
    for tok in tokens:
        if tok == "--":
            return None
        if not tok.startswith("-") or tok == "-" or re.match(r"^-\d", tok):
            continue
        name = tok.split("=", 1)[0] if tok.startswith("--") else tok[:2]
        if name in known or (name.startswith("--") and any(k.startswith(name) for k in known)):
            continue
        return name
    return None


def _option_hint(root: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, str] | None:
    for parser, tokens in reversed(_segments(root, argv)):
        name = _unknown_option(parser, tokens)
        if name is not None:
            longs = [s for s in parser._option_string_actions if s.startswith("--") and s != "--help"]
            match = _closest(name, longs if name.startswith("--") else list(parser._option_string_actions))
            msg = f"unknown option {name}" + (f"; did you mean {match}?" if match else "")
            return msg, parser.prog
    return None


_CHOICE = re.compile(r"^argument (?P<arg>[^:]+): invalid choice: '?(?P<got>[^']*?)'?\s*[(,]\s*choose from "
                     r"(?P<choices>.*?)\)?$", re.S)


def _choice_hint(message: str) -> str | None:
    m = _CHOICE.match(message.strip())
    if m is None:
        return None
    choices = re.findall(r"'([^']*)'", m["choices"]) or [c.strip() for c in m["choices"].split(",") if c.strip()]
    got, arg = m["got"], m["arg"]
    match = _closest(got, choices)
    head = "unknown command" if arg in COMMAND_METAVARS else f"argument {arg}: invalid choice"
    if match is not None:
        return f"{head} '{got}'; did you mean '{match}'?"
    return f"{head} '{got}' (choose from {', '.join(choices)})"


def explain(message: str, root: argparse.ArgumentParser, argv: Sequence[str] | None) -> tuple[str, str | None]:
    """argparse's error ``message`` for ``argv`` -> (a clearer one-line message, the prog whose --help fits, or
    None to keep the parser's): a mistyped sub-command or choice first, else the first unknown option."""
    choice = _choice_hint(message)
    if choice is not None:
        return choice, None
    if argv is not None:
        hint = _option_hint(root, list(argv))
        if hint is not None:
            return hint
    return message, None

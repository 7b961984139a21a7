#!/usr/bin/env python3
"""A figure stated in README.md, recomputed by a command and checked within a tolerance.

Usage: figure_within.py [OPTIONS] EXPECTED TOLERANCE REGEX COMMAND...

Runs COMMAND, searches its output (stdout, then stderr) with REGEX (Python syntax, '^' and '$'
at line ends, '.' not crossing them) and takes the number of its first capture group (commas
allowed: 8,030,261,248). Fails (exit 1) when the command exits non-zero, when REGEX does not
match, or when |value - EXPECTED| > TOLERANCE (absolute, in the figure's unit). It prints what
it found either way.

Options (before EXPECTED):
  --all mean|sum|min|max|count  every match, not only the first, folded into one value
                                (count: the number of matches; zero matches is then a value)
  --abs                         each match's |value| (mean |error| from signed errors)
  --expr EXPR                   each match's value from its groups g1, g2, ... (e.g. g2-g1)
  --matches N                   fail unless REGEX matches exactly N times
"""
import math
import re
import subprocess
import sys


def usage(message):
    sys.stderr.write(f"figure_within.py: {message}\n{__doc__}")
    sys.exit(2)


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        raise ValueError(f"not a number: {text!r}")


def show(x):
    """A value as read: whole numbers in full (8030261248), others to 6 significant digits."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return f"{x:.6g}"


def main(argv):
    fold, take_abs, expr, want_matches = "first", False, None, None
    while argv and argv[0].startswith("--"):
        flag = argv.pop(0)
        if flag == "--abs":
            take_abs = True
        elif flag in ("--all", "--expr", "--matches"):
            if not argv:
                usage(f"{flag} needs a value")
            value = argv.pop(0)
            if flag == "--all":
                if value not in ("mean", "sum", "min", "max", "count"):
                    usage(f"--all {value}: must be mean, sum, min, max or count")
                fold = value
            elif flag == "--expr":
                expr = compile(value, "--expr", "eval")
            else:
                want_matches = int(value)
        else:
            usage(f"unknown option {flag}")
    if len(argv) < 4:
        usage("needs EXPECTED TOLERANCE REGEX COMMAND...")
    expected, tolerance = float(argv[0]), float(argv[1])
    regex = re.compile(argv[2], re.MULTILINE)
    command = argv[3:]

    run = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=600)
    out = run.stdout + run.stderr
    print("command: " + " ".join(command))
    failures = []
    if run.returncode != 0:
        failures.append(f"exit code {run.returncode}, expected 0")

    matches = list(regex.finditer(out))
    if fold == "first":
        matches = matches[:1]
    values = []
    for m in matches:
        try:
            if expr is not None:
                groups = {f"g{i}": number(g) for i, g in enumerate(m.groups(), 1)}
                value = float(eval(expr, {"__builtins__": {}, "abs": abs}, groups))
            elif fold == "count":
                value = 1.0
            else:
                value = number(m.group(1))
        except (IndexError, ValueError, NameError, ZeroDivisionError) as e:
            failures.append(f"match {m.group(0)!r}: {e}")
            continue
        values.append(abs(value) if take_abs else value)
        print(f"matched: {m.group(0).strip()!r} -> {show(values[-1])}")
    if want_matches is not None and len(matches) != want_matches:
        failures.append(f"{len(matches)} matches of {regex.pattern!r}, expected {want_matches}")

    value = None
    if fold == "count":
        value = float(len(values))
    elif not matches:
        failures.append(f"no match for {regex.pattern!r}")
    elif values:
        value = {"first": values[0], "mean": sum(values) / len(values), "sum": sum(values),
                 "min": min(values), "max": max(values)}[fold]
    if value is not None:
        how = "" if fold == "first" else f" ({fold} of {len(values)})"
        print(f"found {show(value)}{how}; README says {show(expected)}, tolerance {show(tolerance)}")
        if not math.isfinite(value) or abs(value - expected) > tolerance:
            failures.append(f"|{show(value)} - {show(expected)}| = {show(abs(value - expected))} "
                            f"> tolerance {show(tolerance)}")
    if failures:
        tail = out[-3000:]
        print("--- command output (last 3000 characters) ---\n" + tail)
        for f in failures:
            print("figure_within.py: FAIL: " + f)
        return 1
    print("figure_within.py: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

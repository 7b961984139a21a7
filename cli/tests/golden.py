#!/usr/bin/env python3
"""A command-line test checked whole: the command exits with the expected code and its output
(stdout, then stderr) matches the regular expression (written for CMake, read by Python's re
with '.' matching newlines too, as CMake's does). Usage: golden.py CODE REGEX COMMAND..."""
import re
import subprocess
import sys

code, regex, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
run = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=900)
out = run.stdout + run.stderr
sys.stdout.write(out)
ok = True
if run.returncode != code:
    print(f"golden.py: exit code {run.returncode}, expected {code}")
    ok = False
if not re.search(regex, out, re.DOTALL):
    print(f"golden.py: no match for {regex!r}")
    ok = False
sys.exit(0 if ok else 1)

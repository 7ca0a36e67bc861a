#!/usr/bin/env python3
"""The import check of scripts/lint: every module in Sources imports only what the layering table in
ARCHITECTURE.md allows (the fenced block marked `layers`). A module missing from the table, or a
table row for a module that does not exist, fails too, so the document and the code cannot drift.

Each row of the block reads `Module: Allowed Allowed …` (`-` for none). System modules (Foundation,
Dispatch, Synchronization, Glibc, …) are always allowed."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM = {"Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin",
          "Android", "WinSDK", "Testing", "XCTest", "_Concurrency", "Swift"}
IMPORT = re.compile(r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def read_table(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"```layers\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"{path}: no ```layers block (the module table scripts/lint checks against)")
    table = {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            sys.exit(f"{path}: layers block line {n}: expected 'Module: Allowed …', got {line!r}")
        name, allowed = line.split(":", 1)
        table[name.strip()] = {a for a in allowed.split() if a != "-"}
    return table


def check(root):
    table = read_table(os.path.join(root, "ARCHITECTURE.md"))
    sources = os.path.join(root, "Sources")
    modules = sorted(d for d in os.listdir(sources) if os.path.isdir(os.path.join(sources, d)))
    problems = []
    for module in modules:
        swift_files = []
        for base, _, files in os.walk(os.path.join(sources, module)):
            swift_files += [os.path.join(base, f) for f in files if f.endswith(".swift")]
        if not swift_files:
            continue  # a C target: module map and headers only
        if module not in table:
            problems.append(f"Sources/{module}: not in ARCHITECTURE.md's layers table; add a row saying what it may import")
            continue
        allowed = table[module] | SYSTEM
        for path in sorted(swift_files):
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = IMPORT.match(line)
                if m and m.group(1) not in allowed:
                    rel = os.path.relpath(path, root)
                    problems.append(f"{rel}:{n}: {module} may not import {m.group(1)} (ARCHITECTURE.md, layers)")
    for module in sorted(set(table) - set(modules)):
        problems.append(f"ARCHITECTURE.md: the layers table names {module}, which is not a module in Sources")
    return problems


def self_test():
    """The check must fail on a forbidden import, a module missing from the table and a row for a
    module that does not exist, and pass on a tree that keeps the rules."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def tree(layers, files):
            for d in ("Sources",):
                os.makedirs(os.path.join(root, d), exist_ok=True)
            with open(os.path.join(root, "ARCHITECTURE.md"), "w") as f:
                f.write("```layers\n" + layers + "```\n")
            for path, text in files.items():
                full = os.path.join(root, "Sources", path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w") as f:
                    f.write(text)
            return check(root)
        good = tree("Low: -\nHigh: Low\n", {"Low/a.swift": "import Foundation\n", "High/b.swift": "internal import Low\n"})
        assert good == [], good
        bad = tree("Low: -\nHigh: Low\n", {"Low/a.swift": "import Foundation\n@preconcurrency import High\n"})
        assert len(bad) == 1 and "Low may not import High" in bad[0], bad
        os.remove(os.path.join(root, "Sources", "Low", "a.swift"))
        missing = tree("High: Low\n", {"Low/a.swift": "import Foundation\n"})
        assert any("Sources/Low: not in ARCHITECTURE.md" in p for p in missing), missing
        extra = tree("Low: -\nHigh: Low\nGone: -\n", {"Low/a.swift": "import Foundation\n"})
        assert any("names Gone" in p for p in extra), extra


def main():
    self_test()
    problems = check(ROOT)
    if problems:
        print("imports that break the layering:")
        print("\n".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

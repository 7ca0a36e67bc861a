#!/usr/bin/python3
"""No `#expect`/`#require` in Tests whose expression has `try` at its top level and a closure
literal inside, e.g. `#expect(try await eventually { ... })`.

Swift 6.3.1 miscompiles it inside an enclosing closure (a fixture's `with { f in ... }`): a closure
written after it, outside any macro, runs that earlier closure's body with its own captures, so a
test silently calls the wrong thing. Bind the call first (`let ok = try await eventually { ... }`),
then check the value. A `try` only inside the closure (`#expect(await rainError { try ... })`) is
fine. Prints each site; exits 1 when there is one."""

import glob
import re
import sys


# String literals (multi-line and raw ones included), whose parentheses and braces are not code.
STRING = re.compile(r'(#*)"""[\s\S]*?"""\1|(#*)"(?:[^"\\\n]|\\.)*"\2')


def blank_strings(src):
    """`src` with every string literal's text turned to spaces (newlines kept), so offsets hold."""
    return STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)


def sites(root="Tests"):
    for path in sorted(glob.glob(f"{root}/**/*.swift", recursive=True)):
        src = blank_strings(open(path, encoding="utf-8").read())
        for m in re.finditer(r"#(expect|require)\(", src):
            i, depth, j = m.end(), 1, m.end()
            while j < len(src) and depth:
                depth += {"(": 1, ")": -1}.get(src[j], 0)
                j += 1
            arg = src[i:j - 1]
            if "{" not in arg:
                continue
            top, level = [], 0
            for c in arg:
                if c == "{":
                    level += 1
                elif c == "}":
                    level -= 1
                elif level == 0:
                    top.append(c)
            if re.search(r"\btry\b", "".join(top)):
                yield path, src.count("\n", 0, m.start()) + 1


def main():
    found = list(sites())
    if found:
        print("#expect/#require with `try` and a closure inside (Swift 6.3.1 runs the wrong closure after it; "
              "bind the call with let first):")
        for path, line in found:
            print(f"  {path}:{line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sums callgrind output files (the parts of one run) for scripts/bench-instructions.

usage: callgrind-summary.py PER_CALL_REGEX TOP OWN_REGEX FILE...

Prints, one per line:
  total IR            instructions counted in all the files
  calls N             calls made to the functions whose (mangled) name matches PER_CALL_REGEX
  own IR              self instructions of the functions whose name matches OWN_REGEX ('' for none)
  self IR NAME        the TOP functions by self instructions, most first

A cost line that follows a calls= line is the inclusive cost of that call and belongs to the
caller's inclusive figure, not to its self cost: it is left out of the self sums.
"""
import re
import sys


def main() -> None:
    if len(sys.argv) < 5:
        sys.exit("usage: callgrind-summary.py PER_CALL_REGEX TOP OWN_REGEX FILE...")
    per_call = re.compile(sys.argv[1])
    top = int(sys.argv[2])
    own = re.compile(sys.argv[3]) if sys.argv[3] else None
    total = 0
    calls = 0
    self_cost: dict[str, int] = {}
    for path in sys.argv[4:]:
        names: dict[str, str] = {}  # fn and cfn share one compression table per file

        def name(spec: str) -> str:
            m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
            if not m:
                return spec
            if m.group(2) is not None:
                names[m.group(1)] = m.group(2)
            return names.get(m.group(1), "")

        fn = ""
        cfn = ""
        after_calls = False
        summary = None
        totals = None
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                c = line[0]
                if c.isdigit() or c in "+-*":
                    if after_calls:
                        after_calls = False
                        continue
                    parts = line.split()
                    if len(parts) >= 2 and parts[1].isdigit():
                        self_cost[fn] = self_cost.get(fn, 0) + int(parts[1])
                    continue
                if line.startswith("fn="):
                    fn = name(line[3:])
                elif line.startswith("cfn="):
                    cfn = name(line[4:])
                elif line.startswith("calls="):
                    after_calls = True
                    if per_call.search(cfn):
                        calls += int(line[6:].split()[0])
                elif line.startswith("summary:"):
                    summary = int(line.split()[1])
                elif line.startswith("totals:"):
                    totals = int(line.split()[1])
        total += totals if totals is not None else (summary or 0)
    print(f"total {total}")
    print(f"calls {calls}")
    print(f"own {sum(v for k, v in self_cost.items() if own and own.search(k))}")
    for k, v in sorted(self_cost.items(), key=lambda kv: -kv[1])[:top]:
        print(f"self {v} {k}")


if __name__ == "__main__":
    main()

# Shared by the benchmark scripts (source it; it defines functions only).

# stat_of: the numbers on stdin, one per line -> "MEDIAN MIN MAX" (the median of an even count is
# the mean of the middle two); nothing for no numbers.
stat_of() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}

# bench_log_in RAINWALLET SOCKET EMAIL: logs in by code on the benchmark's daemon (which runs with
# the development outbox), reading the code from it. Returns non-zero, saying which step failed.
bench_log_in() {
  local cli=$1 sock=$2 email=$3 code
  "$cli" --socket "$sock" code send --email "$email" >/dev/null || { echo "code send failed" >&2; return 1; }
  code=$("$cli" --socket "$sock" --json dev outbox | sed -n 's/.*"code": *"\([0-9]\{6\}\)".*/\1/p' | tail -1)
  [ -n "$code" ] || { echo "no code in the development outbox" >&2; return 1; }
  printf '%s\n' "$code" | "$cli" --socket "$sock" code confirm >/dev/null || { echo "the login failed" >&2; return 1; }
}

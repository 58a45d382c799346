#!/usr/bin/env python3
"""ci/test's last line: ctest's verdict with every skip counted and its reason.

A skip can hide in five places, and the line names each:
- a ctest entry reported "(Skipped)" (its skip exit status, e.g. 77): counted
  with its name and the last line of its output that says why;
- a Criterion test skipped inside a program that passed (cr_skip_test,
  cr_skip, .disabled): ctest reads the program as passed. ci/test runs ctest
  with CRITERION_OUTPUTS=tap:-, so every Criterion program prints TAP on
  stdout ("ok - suite::test  # SKIP reason"); ctest keeps every entry's whole
  output in Testing/Temporary/LastTest.log, where this script reads them and
  counts them per reason. A case left out by the entry's --filter (the ofi
  re-runs of a suite: tests/plugins/ofi/CMakeLists.txt) is printed by
  Criterion 2.4 exactly as a skip ("# SKIP test was skipped"), but it is no
  skip: it was not selected, and it runs in the suite's own entry. Such a case
  is told apart by the filter on the entry's Command line, and counted apart
  ("not selected by a --filter, not skips"); a case that the filter selects
  and that skips is counted as a skip, and when the filter cannot be read
  every case that skips is;
- a pytest test skipped inside a passing entry: counted per entry from
  pytest's last line (the most any rank skipped); its reasons are in that
  entry's output with pytest -rs;
- a suite or transport the soak or the chaos harness left out ("soak:
  SKIPPED what: why", "chaos: SKIPPED ..."), in soak_bounded or
  chaos_bounded that passed: counted with that line;
- the Horovod reference column of the compatibility suite
  (compat_horovod_np2/3), not registered when Horovod could not be had:
  "compat against Horovod: NOT RUN (reason)".

  summary_line.py --console CTEST_OUTPUT --last-test-log LastTest.log --rc N
                  [--horovod-not-run REASON]
  summary_line.py --self-test

Prints the line; its own exit status is 0 (ci/test keeps ctest's).
"""
import argparse
import re
import shlex
import sys

ENTRY = re.compile(r"^\d+/\d+ Testing: (\S+)\s*$", re.M)
TAP_SKIP = re.compile(r"^ok\b[^#\n]*?-\s*(\S+)[^#\n]*#\s*SKIP\b[ \t]*(.*)$", re.M | re.I)
# pytest's last line ("[0]: 5 passed, 2 skipped in 3.1s"), once per rank
PYTEST_SKIPPED = re.compile(r"^(?:\[\d+\]: )?=*\s*\d+ \w+.*?\b(\d+) skipped\b.* in [\d.]+s", re.M)
# the soak's and the chaos harness's own skips: "soak: SKIPPED what: why"
HARNESS_SKIP = re.compile(r"^(?:\[\d+\]: )?((?:soak|chaos): SKIPPED .*?)\s*$", re.M)
COMMAND = re.compile(r"^Command: (.*)$", re.M)
CTEST_SKIPPED = re.compile(r"^\s*\d+ - (\S+) \(Skipped\)", re.M)
SUMMARY = re.compile(r"^\d+% tests passed.*$", re.M)
NAMES_SHOWN = 3


def entries(last_test_log):
    """{ctest name: its output} from ctest's LastTest.log."""
    out = {}
    marks = list(ENTRY.finditer(last_test_log))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(last_test_log)
        body = last_test_log[m.end():end]
        start = body.find("\nOutput:\n")
        stop = body.find("<end of output>")
        if start >= 0:
            body = body[start + len("\nOutput:\n"):stop if stop > start else len(body)]
        out[m.group(1)] = body
    return out


def commands(last_test_log):
    """{ctest name: its command line's words} from LastTest.log."""
    out = {}
    marks = list(ENTRY.finditer(last_test_log))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(last_test_log)
        c = COMMAND.search(last_test_log, m.end(), end)
        if c:
            try:
                out[m.group(1)] = shlex.split(c.group(1))
            except ValueError:
                pass
    return out


def filter_regex(pattern):
    """Criterion 2.4's --filter pattern (matched against "suite/test"; "*"
    crosses "/"; [..], [!..], @(a|b)) as a compiled regex, or None for a
    pattern this reading does not cover (?(..) *(..) +(..) !(..)): then no
    case is taken as left out."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch in "?*+!" and pattern[i + 1:i + 2] == "(":
            return None
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                return None
            body = pattern[i + 1:j]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = j
        elif ch == "@" and pattern[i + 1:i + 2] == "(":
            j = pattern.find(")", i)
            if j < 0 or "(" in pattern[i + 2:j]:
                return None
            out.append("(?:" + "|".join(re.escape(a) for a in pattern[i + 2:j].split("|")) + ")")
            i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def selected_by(words):
    """A predicate on "suite::test" saying whether the entry's --filter
    selects that case; None when every case is selected (no --filter) or
    the filter cannot be read."""
    for k, w in enumerate(words):
        pat = words[k + 1] if w == "--filter" and k + 1 < len(words) else (
            w[len("--filter="):] if w.startswith("--filter=") else None)
        if pat is not None:
            rx = filter_regex(pat)
            return (lambda case: bool(rx.match(case.replace("::", "/", 1)))) if rx else None
    return None


def criterion_skips(outputs, ctest_skipped=(), cmds=None):
    """({reason: [(ctest name, criterion test)]} of the TAP skip lines of the
    entries that were not skipped as a whole, {ctest name: cases that its
    --filter left out, not counted as skips})."""
    by_reason, left_out = {}, {}
    for name, text in outputs.items():
        if name in ctest_skipped:
            continue
        selects = selected_by((cmds or {}).get(name, []))
        for m in TAP_SKIP.finditer(text):
            if selects and not selects(m.group(1)):
                left_out[name] = left_out.get(name, 0) + 1
                continue
            reason = m.group(2).strip() or "no reason given"
            by_reason.setdefault(reason, []).append((name, m.group(1)))
    return by_reason, left_out


def skip_reason(text):
    """The last output line of a skipped entry that says why (one that
    mentions a skip, else the last line)."""
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.startswith("---")]
    saying = [x for x in lines if re.search(r"skip", x, re.I)]
    pick = (saying or lines or ["no output"])[-1]
    return pick if len(pick) <= 120 else pick[:117] + "..."


def names(items):
    shown = sorted(set(items))
    more = len(shown) - NAMES_SHOWN
    return ", ".join(shown[:NAMES_SHOWN]) + (", ... %d more" % more if more > 0 else "")


def line(console, last_test_log, rc, horovod_not_run=None):
    found = SUMMARY.findall(console)
    parts = [found[-1] if found else "ctest printed no summary (exit status %d)" % rc]
    outputs = entries(last_test_log)
    skipped = sorted(set(CTEST_SKIPPED.findall(console)))
    if skipped:
        by_reason = {}
        for s in skipped:
            by_reason.setdefault(skip_reason(outputs.get(s, "")), []).append(s)
        parts.append("%d ctest entr%s skipped: %s" % (
            len(skipped), "y" if len(skipped) == 1 else "ies", "; ".join(
                "%d x \"%s\" (%s)" % (len(v), k, names(v))
                for k, v in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])))))
    else:
        parts.append("0 ctest entries skipped")
    crit, left_out = criterion_skips(outputs, skipped, commands(last_test_log))
    total = sum(len(v) for v in crit.values())
    if total:
        parts.append("%d Criterion test%s skipped inside passing programs: %s" % (
            total, "" if total == 1 else "s", "; ".join(
                "%d x \"%s\" (%s)" % (len(v), k, names(n for n, _ in v))
                for k, v in sorted(crit.items(), key=lambda kv: (-len(kv[1]), kv[0])))))
    elif not outputs:
        parts.append("Criterion skips NOT COUNTED (no %s)" % "LastTest.log")
    else:
        parts.append("0 Criterion tests skipped")
    if left_out:
        n = sum(left_out.values())
        parts.append("%d Criterion case%s not selected by a re-run's --filter, not skips (%s)" % (
            n, "" if n == 1 else "s", names(left_out)))
    pytest = {}
    for name, text in outputs.items():
        counts = [int(n) for n in PYTEST_SKIPPED.findall(text)]
        if name not in skipped and counts and max(counts):
            pytest[name] = max(counts)  # every rank runs the same tests
    if pytest:
        parts.append("%d pytest test%s skipped inside passing entries (why: pytest -rs): %s" % (
            sum(pytest.values()), "" if sum(pytest.values()) == 1 else "s", ", ".join(
                "%s %d" % kv for kv in sorted(pytest.items(), key=lambda kv: (-kv[1], kv[0])))))
    harness = {}
    for name, text in outputs.items():
        if name not in skipped:
            for m in HARNESS_SKIP.finditer(text):
                harness.setdefault(m.group(1), []).append(name)
    if harness:
        parts.append("%d left out by a harness: %s" % (
            sum(len(v) for v in harness.values()), "; ".join(
                "\"%s\" (%s)" % (k, names(v)) for k, v in sorted(harness.items()))))
    if horovod_not_run:
        parts.append("compat against Horovod: NOT RUN (%s)" % horovod_not_run)
    return "ci/test: " + "; ".join(parts)


LOG = """Start testing: Dec 06 10:00 UTC
----------------------------------------------------------
1/3 Testing: test_ipv6
1/3 Test: test_ipv6
Command: "/b/tests/test_ipv6"
Directory: /b/tests
"test_ipv6" start time: Dec 06 10:00 UTC
Output:
----------------------------------------------------------
TAP version 13
1..3
ok - ipv6::loopback  # SKIP no IPv6 loopback here (::1 cannot be bound)
ok - ipv6::v4mapped  # SKIP no IPv6 loopback here (::1 cannot be bound)
ok - ipv6::parse  (0.00s)
[====] Synthesis: Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0
<end of output>
Test time =   0.02 sec
----------------------------------------------------------
Test Passed.
"test_ipv6" end time: Dec 06 10:00 UTC
----------------------------------------------------------

3/3 Testing: hosts_ssh_gloo
3/3 Test: hosts_ssh_gloo
Output:
----------------------------------------------------------
hosts: starting
hosts: SKIPPED: not root (network namespaces need root)
<end of output>
Test Skipped.
----------------------------------------------------------

2/3 Testing: test_api
2/3 Test: test_api
Output:
----------------------------------------------------------
ok - api::init  (0.01s)
ok - api::gone  # SKIP test was skipped
<end of output>
Test Passed.
4/4 Testing: soak_bounded
Output:
soak: SKIPPED suite tf: no TensorFlow venv
<end of output>
5/5 Testing: compat_plait_np2_torch113
Output:
[1]: 277 passed, 3 skipped in 5.77s
[0]: 277 passed, 3 skipped, 1 warning in 5.79s
soak: 40 passed, 0 failed (jobs; 1 skipped suites or transports, see above)
<end of output>
6/6 Testing: test_ops_allreduce_ofi_shm
6/6 Test: test_ops_allreduce_ofi_shm
Command: "/usr/bin/bash" "/s/tests/harness/ofi_rerun.sh" "/b/tests/ofi_probe" "/b/tests/test_ops_allreduce" "--verbose" "--filter" "ops_allreduce/matrix_3ranks*"
Directory: /b/tests/plugins/ofi
Output:
----------------------------------------------------------
ok - ops_allreduce::matrix_2ranks_sum  # SKIP test was skipped
ok - ops_allreduce::matrix_4ranks_sum  # SKIP test was skipped
ok - ops_allreduce::matrix_3ranks_sum  (1.01s)
ok - ops_allreduce::matrix_3ranks_big  # SKIP test was skipped
<end of output>
"""
CONSOLE = """1/3 Test #1: test_ipv6 ........   Passed    0.02 sec
100% tests passed, 0 tests failed out of 3

The following tests did not run:
\t  3 - hosts_ssh_gloo (Skipped)
"""


def self_test():
    got = line(CONSOLE, LOG, 0, "Horovod not available: pip install horovod==0.28.1 failed")
    want = ('ci/test: 100% tests passed, 0 tests failed out of 3; '
            '1 ctest entry skipped: 1 x "hosts: SKIPPED: not root (network namespaces need '
            'root)" (hosts_ssh_gloo); 4 Criterion tests skipped inside passing programs: '
            '2 x "no IPv6 loopback here (::1 cannot be bound)" (test_ipv6); '
            '2 x "test was skipped" (test_api, test_ops_allreduce_ofi_shm); '
            '2 Criterion cases not selected by a re-run\'s --filter, not skips '
            '(test_ops_allreduce_ofi_shm); '
            '3 pytest tests skipped inside passing entries (why: pytest -rs): '
            'compat_plait_np2_torch113 3; '
            '1 left out by a harness: "soak: SKIPPED suite tf: no TensorFlow venv" '
            '(soak_bounded); '
            'compat against Horovod: NOT RUN (Horovod not available: pip install '
            'horovod==0.28.1 failed)')
    assert got == want, "\n got: %s\nwant: %s" % (got, want)
    # nothing skipped anywhere: said so, and no Horovod part when it ran
    clean = LOG.replace("# SKIP", "(0.00s)").replace("soak: SKIPPED", "soak: ran").replace(
        ", 3 skipped", "")
    got = line("100% tests passed, 0 tests failed out of 2\n", clean, 0)
    assert got == ("ci/test: 100% tests passed, 0 tests failed out of 2; "
                   "0 ctest entries skipped; 0 Criterion tests skipped"), got
    # without LastTest.log the Criterion skips cannot be counted: said so
    got = line("", "", 8)
    assert got == ("ci/test: ctest printed no summary (exit status 8); 0 ctest entries "
                   "skipped; Criterion skips NOT COUNTED (no LastTest.log)"), got
    # a skip line in a failed entry's output counts too; many programs are elided
    many = "".join("%d/9 Testing: t%d\nOutput:\nok - s::x # SKIP why\n<end of output>\n" % (i, i)
                   for i in range(1, 6))
    got = line(CONSOLE.replace("\t  3 - hosts_ssh_gloo (Skipped)\n", ""), many, 0)
    assert '5 Criterion tests skipped inside passing programs: 5 x "why" ' \
        "(t1, t2, t3, ... 2 more)" in got, got
    # Criterion 2.4's filter, as its runner read it (a case it selects runs,
    # one it leaves out prints "# SKIP test was skipped"): "*" crosses "/"
    for pat, picked in (("*a", "a"), ("s/?", "abc"), ("s/[!a]", "bc"), ("s/@(a|c)", "ac"),
                        ("s*", "abc"), ("s/[ac]", "ac"), ("ops_allreduce/matrix_[23]ranks_*",
                                                          "")):
        rx = filter_regex(pat)
        assert "".join(c for c in "abc" if rx.match("s/" + c)) == picked, pat
    assert filter_regex("ops_allreduce/matrix_[23]ranks_*").match(
        "ops_allreduce/matrix_3ranks_sum_fusion_cache")
    # a filter this script cannot read: every case that skips counts as a skip
    bang = LOG.replace('"ops_allreduce/matrix_3ranks*"', '"ops_allreduce/!(matrix_2*)"')
    got = line(CONSOLE, bang, 0)
    assert "6 Criterion tests skipped" in got and "not selected" not in got, got
    # no --filter: every skip counts
    got = line(CONSOLE, LOG.replace('"--filter" "ops_allreduce/matrix_3ranks*"', ""), 0)
    assert "6 Criterion tests skipped" in got and "not selected" not in got, got
    print("summary_line.py --self-test: ok (ctest skips, Criterion skips per reason and cases "
          "a --filter left out, pytest and harness skips, Horovod)")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--console", required=True, help="ctest's console output, saved")
    a.add_argument("--last-test-log", required=True, help="Testing/Temporary/LastTest.log")
    a.add_argument("--rc", type=int, default=0, help="ctest's exit status")
    a.add_argument("--horovod-not-run", help="why compat_horovod_* did not run")
    args = a.parse_args(argv)

    def read(path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""
    print(line(read(args.console), read(args.last_test_log), args.rc, args.horovod_not_run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

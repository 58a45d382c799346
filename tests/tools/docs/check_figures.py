#!/usr/bin/env python3
"""Figures the documents quote must match the stored results they cite.

A figure quoted from a file in bench/results/ carries, right after the
paragraph or table that quotes it, an HTML comment (invisible when rendered)
saying where in the file it comes from:

    <!-- figures: bench/results/fusion-gloo.jsonl
      mix=uniform-64k cycle_time_ms=1 threshold_bytes=0: step_s_median 108.6 ms
      mix=uniform-64k cycle_time_ms=1 threshold_bytes=67108864: step_s_median 14.5 ms
    -->
    <!-- figures: bench/results/bench-fusion.txt
      after "threshold 0, cycle 1 ms, cache 1024": median 507.5 ms
    -->

- a .jsonl file: the one record whose fields equal the selectors (none, or
  more than one, is an error); a field in seconds (step_s_median, t_s) read
  in ms, us or s as the unit says, any other field as it is;
  `median(FIELD)` is the median of a list field (per-step times);
  `median_over(FIELD)` the median of FIELD over every record the selectors
  match (one per round or trial: at least one must match);
- any other file: the first number after the word (here "median") past the
  first occurrence of the anchor; without a word (`after "| 2 | openmpi |":
  2.9 us`), the first number past the anchor. Several anchors are looked
  for in turn, each past the one before (`after "### allreduce-64M, 2 ranks"
  "| plait-gloo |": 54 ms`: a row of a later table whose first cell repeats).

A note whose only line is `rows` says that every table line since the
previous heading or note is a line of the file, verbatim (a table a
benchmark printed, copied).

A figure of an earlier run, quoted as history, names the file as a commit
held it: `<!-- figures: git:b40fc51:docs/performance/goals.md` (git show).

Each figure must equal the file's value rounded to the decimals quoted, and
the number must appear as quoted ("108.6", alone or as a range's end, as in
"0.98-1.24x") in the text between the previous heading and this comment, so
the prose cannot drift from its note.
Every link to a data file of bench/results/ (.jsonl, .txt, .md, .csv) in a
checked document, and every mention of one in its prose (`records in
bench/results/x.jsonl`; not in a table row or a comment), must be followed,
in the same section, by a figures comment on that file, or by
`<!-- figures: none bench/results/FILE ... -->` (a link given for no figure
quoted from it).

  check_figures.py ROOT [DOC...]   # default: README.md and every docs/*.md
  check_figures.py --self-test

Exit 0 when every figure matches; 1 listing each mismatch.
"""
import glob
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

COMMENT = re.compile(r"<!--\s*figures:\s*(.*?)-->", re.S)
ANY_COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK = re.compile(r"\]\(((?:\.\./)?bench/results/[^)#\s]+\.(?:jsonl|txt|md|csv))\)")
MENTION = re.compile(r"(?<![\w/.])((?:\.\./)?bench/results/[\w./-]+\.(?:jsonl|txt|md|csv))\b")
HEADING = re.compile(r"^#{1,6} ", re.M)
NUMBER = r"-?\d+(?:\.\d+)?"
SCALE = {"ms": 1e3, "us": 1e6, "s": 1.0}


def decimals(text):
    return len(text.split(".")[1]) if "." in text else 0


def read_text(path):
    """A stored file's text; `ROOT/git:REV:PATH` is PATH as commit REV held it
    (a figure of an earlier run, quoted as history), read with git show."""
    m = re.match(r"(.*?)/?git:([0-9a-f]{7,40}):(.+)$", path)
    if not m:
        with open(path, encoding="utf-8") as f:
            return f.read()
    p = subprocess.run(["git", "-C", m.group(1) or ".", "show", "%s:%s" % m.group(2, 3)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise OSError("git show %s:%s: %s" % (m.group(2), m.group(3),
                                              (p.stderr.strip() or "failed").splitlines()[-1]))
    return p.stdout


def jsonl_value(path, selectors, field, unit, cache):
    if path not in cache:
        cache[path] = [json.loads(x) for x in read_text(path).splitlines() if x.strip()]
    found = [r for r in cache[path]
             if all(str(r.get(k)) == v for k, v in selectors.items())]
    over = re.fullmatch(r"median_over\((\w+)\)", field)
    if len(found) != 1 and not (over and found):
        raise ValueError("%d records match %s" % (len(found), selectors))
    m = over or re.fullmatch(r"median\((\w+)\)", field)
    name = m.group(1) if m else field
    if any(name not in r for r in found):
        raise ValueError("a record matching %s has no field %r" % (selectors, name))
    if over:
        value = statistics.median(float(r[name]) for r in found)
    else:
        value = statistics.median(found[0][name]) if m else float(found[0][name])
    if re.search(r"(^|_)s(_|$)", name) and unit in SCALE:
        value *= SCALE[unit]
    return value


def text_value(path, anchors, word, cache):
    if path not in cache:
        cache[path] = read_text(path)
    text = cache[path]
    pos = 0
    for i, anchor in enumerate(anchors):
        at = text.find(anchor, pos)
        if at < 0:
            raise ValueError("no line holds %r%s" % (
                anchor, " past %r" % anchors[i - 1] if i else ""))
        pos = at + len(anchor)
    lead = re.escape(word) + r"\s+" if word else r"[^\d-]*?"
    m = re.compile(lead + "(" + NUMBER + ")").search(text, pos)
    if not m:
        raise ValueError("no number after %r past %r" % (word or "the anchor", anchors[-1]))
    return float(m.group(1))


def check_claim(root, src, claim, cache):
    """One line of a figures comment: returns (quoted text, problem or None)."""
    head, sep, rest = claim.rpartition(":")
    words = rest.split()
    if sep and len(words) == 2 and not src.endswith(".jsonl"):
        words = [""] + words  # the first number after the anchor
    if not sep or len(words) != 3 or not re.fullmatch(NUMBER, words[1]):
        return claim, "cannot read %r (want 'WHERE: FIELD NUMBER UNIT')" % claim
    field, quoted, unit = words
    path = os.path.join(root, src)
    try:
        if src.endswith(".jsonl"):
            selectors = dict(w.split("=", 1) for w in shlex.split(head))
            value = jsonl_value(path, selectors, field, unit, cache)
        else:
            parts = shlex.split(head)
            if len(parts) < 2 or parts[0] != "after":
                return claim, "cannot read %r (want 'after \"ANCHOR\"...: WORD NUMBER UNIT')" % claim
            value = text_value(path, parts[1:], field, cache)
    except (OSError, ValueError) as e:
        return claim, "%s: %s" % (src, e)
    want = "%.*f" % (decimals(quoted), value)
    if want != quoted and not (float(want) == float(quoted) == 0):
        return claim, "%s says %s %s there, the text quotes %s" % (src, want, unit, quoted)
    return "%s %s" % (quoted, unit), None


def copied_rows(root, doc, line, src, text, before, heads, end):
    """A `rows` note: every table line since the previous heading or note
    is a line of src, verbatim (tables printed by a benchmark, copied)."""
    start = max([heads[-1] if heads else 0] + [c.end() for c in before])
    rows = [x for x in text[start:end].splitlines() if x.startswith("|")]
    try:
        lines = set(read_text(os.path.join(root, src)).splitlines())
    except OSError as e:
        return ["%s:%d: %s" % (doc, line, e)]
    if not rows:
        return ["%s:%d: a `rows` note on %s with no table above it" % (doc, line, src)]
    return ["%s:%d: this row is not in %s: %s" % (doc, line, src, r) for r in rows
            if r not in lines]


def check_doc(root, doc):
    problems = []
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        text = f.read()
    cache = {}
    comments = list(COMMENT.finditer(text))
    for i, m in enumerate(comments):
        body = m.group(1).strip()
        src, _, claims = body.partition("\n")
        src = src.strip()
        line = text.count("\n", 0, m.start()) + 1
        if src.split()[:1] == ["none"]:
            continue
        heads = [h.start() for h in HEADING.finditer(text, 0, m.start())]
        start = heads[-1] if heads else 0
        prose = re.sub(r"\s+", " ", COMMENT.sub(" ", text[start:m.start()]))
        claims = [c.strip() for c in claims.splitlines() if c.strip()]
        if claims == ["rows"]:
            problems += copied_rows(root, doc, line, src, text, comments[:i], heads, m.start())
            continue
        if not claims:
            problems.append("%s:%d: a figures comment on %s with no figure" % (doc, line, src))
        for c in claims:
            quoted, problem = check_claim(root, src, c, cache)
            if problem:
                problems.append("%s:%d: %s" % (doc, line, problem))
            elif not re.search(r"(?<![\d.])" + re.escape(quoted.split()[0]) + r"(?![\d])", prose):
                problems.append("%s:%d: %r is not in the text above its note (%s)" % (
                    doc, line, quoted, c))
    return problems + unnoted(doc, text)


def mentions(text):
    """(position, file, 'link' or 'mention') of each data file of bench/results/
    a document links to, or names in its prose (not in a comment or a table row)."""
    found = {m.start(1): (m.group(1), "link") for m in LINK.finditer(text)}
    hidden = [(c.start(), c.end()) for c in ANY_COMMENT.finditer(text)]
    for m in MENTION.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if m.start(1) in found or line.lstrip().startswith("|") or \
                any(a <= m.start() < b for a, b in hidden):
            continue
        found[m.start(1)] = (m.group(1), "mention")
    return sorted((at, src.replace("../", "", 1), how) for at, (src, how) in found.items())


def unnoted(doc, text):
    """Each link or mention with no figures comment on its file after it in its section."""
    problems, said = [], set()
    for at, src, how in mentions(text):
        nxt = HEADING.search(text, at)
        section = text[at:nxt.start() if nxt else len(text)]
        notes = set()
        for c in COMMENT.finditer(section):
            first = c.group(1).strip().split("\n")[0].split()
            notes.update(first[1:] if first[:1] == ["none"] else first[:1])
        line = text.count("\n", 0, at) + 1
        if src not in notes and (line, src) not in said:
            said.add((line, src))
            problems.append("%s:%d: the %s of %s has no figures comment after it in its "
                            "section (or `<!-- figures: none FILE -->`)" % (doc, line, how, src))
    return problems


def self_test():
    tmp = tempfile.mkdtemp(prefix="check-figures-")
    os.makedirs(os.path.join(tmp, "bench", "results"))
    with open(os.path.join(tmp, "bench", "results", "f.jsonl"), "w") as f:
        f.write('{"mix": "u", "thr": 0, "step_s_median": 0.10856}\n')
        f.write('{"mix": "u", "thr": 64, "step_s_median": 0.01447}\n')
        f.write('{"mix": "r", "step_s": [0.3, 0.1, 0.2]}\n')
    with open(os.path.join(tmp, "bench", "results", "b.txt"), "w") as f:
        f.write("x threshold 0, cache 1\n  time per batch   median 507.52 ms   p10 232.96\n")

    def run(doc):
        with open(os.path.join(tmp, "d.md"), "w") as f:
            f.write(doc)
        return check_doc(tmp, "d.md")

    good = ("# A\nUnfused 108.6 ms, fused 14.5 ms ([f](bench/results/f.jsonl)); busy: "
            "507.5 ms ([b](bench/results/b.txt)).\n<!-- figures: bench/results/f.jsonl\n"
            "  mix=u thr=0: step_s_median 108.6 ms\n  mix=u thr=64: step_s_median 14.5 ms\n-->\n"
            "<!-- figures: bench/results/b.txt\n"
            "  after \"threshold 0,\": median 507.5 ms\n-->\n")
    assert run(good) == [], run(good)
    med = "# M\n200 ms\n<!-- figures: bench/results/f.jsonl\n  mix=r: median(step_s) 200 ms\n-->\n"
    assert run(med) == [], run(med)
    assert len(run(med.replace("200", "300"))) == 1
    # the median over the records of rounds: 0.10856 and 0.01447 -> 61.5 ms
    over = "# O\n61.5 ms\n<!-- figures: bench/results/f.jsonl\n  mix=u: median_over(step_s_median) 61.5 ms\n-->\n"
    assert run(over) == [], run(over)
    assert "says 61.5 ms there" in run(over.replace("61.5", "108.6"))[0]
    assert "0 records match" in run(over.replace("mix=u:", "mix=q:"))[0]
    # the README's old pair: neither figure is in the file
    bad = run(good.replace("108.6 ms", "67.7 ms").replace("14.5 ms", "14.2 ms"))
    assert len(bad) == 2 and "says 108.6 ms there, the text quotes 67.7" in bad[0], bad
    # the note right but the prose not: caught too
    drift = run(good.replace("Unfused 108.6 ms", "Unfused 190.0 ms"))
    assert len(drift) == 1 and "'108.6 ms' is not in the text" in drift[0], drift
    # a number inside another (1108.6, 108.65) is not the figure
    assert len(run(good.replace("Unfused 108.6 ms", "Unfused 1108.6 ms"))) == 1
    # a selector matching two records, a missing anchor, a link with no note
    two = run(good.replace("mix=u thr=0:", "mix=u:"))
    assert "2 records match" in two[0], two
    rows = "# R\n| 1 | x | 507.52 ms |\n<!-- figures: bench/results/t.md\n  rows\n-->\n"
    with open(os.path.join(tmp, "bench", "results", "t.md"), "w") as f:
        f.write("| 1 | x | 507.52 ms |\n")
    assert run(rows) == [], run(rows)
    changed = run(rows.replace("507.52", "507.25"))
    assert len(changed) == 1 and "not in bench/results/t.md" in changed[0], changed
    table = run("# T\n| 2 | mpi | 2.9 us |\n<!-- figures: bench/results/b.txt\n"
                "  after \"cache 1\": 507.52 ms\n-->\n".replace("2.9 us", "507.52 ms"))
    assert table == [], table
    gone = run(good.replace('"threshold 0,"', '"threshold 9,"'))
    assert "no line holds" in gone[0], gone
    # anchors in turn: a row of the second table, whose first cell the first table has too
    with open(os.path.join(tmp, "bench", "results", "c.md"), "w") as f:
        f.write("### 4K\n| gloo | 0.29 ms |\n### 64M\n| gloo | 54.46 ms |\n")
    turn = "# C\nabout 54 ms\n<!-- figures: bench/results/c.md\n  after \"### 64M\" \"| gloo |\": 54 ms\n-->\n"
    assert run(turn) == [], run(turn)
    first = run(turn.replace('"### 64M" ', ""))  # the first table's row: 0.29
    assert len(first) == 1 and "says 0 ms there, the text quotes 54" in first[0], first
    order = run(turn.replace('"### 64M" "| gloo |"', '"| gloo | 54" "### 64M"'))
    assert len(order) == 1 and "no line holds '### 64M' past '| gloo | 54'" in order[0], order
    unnoted = run("# A\n3.0 ms ([f](bench/results/f.jsonl))\n# B\n"
                  "<!-- figures: none bench/results/f.jsonl -->\n")
    assert len(unnoted) == 1 and "has no figures comment" in unnoted[0], unnoted
    # a path named in prose, not linked, needs its note too; in a table row or a comment not
    plain = run("# A\n3.0 ms (records in `bench/results/f.jsonl`)\n# B\n")
    assert len(plain) == 1 and "the mention of bench/results/f.jsonl" in plain[0], plain
    assert run("# A\n| x | `bench/results/f.jsonl` |\n<!-- a note: bench/results/f.jsonl -->\n") == []
    other = run("# A\n[f](bench/results/f.jsonl)\n<!-- figures: none bench/results/b.txt -->\n")
    assert len(other) == 1, other
    assert run("# A\n[f](bench/results/f.jsonl), for no figure\n"
               "<!-- figures: none bench/results/f.jsonl -->\n") == []
    # a figure of an earlier run: the file as a commit held it
    git = ["git", "-C", tmp, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    with open(os.path.join(tmp, "bench", "results", "c.md"), "w") as f:
        f.write("| 1 | y |\n")
    subprocess.run(git + ["add", "bench/results/b.txt", "bench/results/c.md"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "run 1"], check=True)
    rev = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    with open(os.path.join(tmp, "bench", "results", "b.txt"), "w") as f:
        f.write("x threshold 0, cache 1\n  time per batch   median 99.0 ms\n")
    old = "# H\nthen 507.5 ms\n<!-- figures: git:%s:bench/results/b.txt\n" \
          "  after \"threshold 0,\": median 507.5 ms\n-->\n" % rev
    assert run(old) == [], run(old)
    assert "says 99.0 ms there" in run(old.replace("git:%s:" % rev, ""))[0]
    assert "git show 0000000" in run(old.replace(rev, "0000000"))[0]
    # a table copied from a file as a commit held it (`rows`)
    with open(os.path.join(tmp, "bench", "results", "c.md"), "w") as f:
        f.write("| 1 | z |\n")
    held = "# T\n| 1 | y |\n<!-- figures: git:%s:bench/results/c.md\n  rows\n-->\n" % rev
    assert run(held) == [], run(held)
    assert "this row is not in" in run(held.replace("git:%s:" % rev, ""))[0]
    print("check_figures.py --self-test: ok (jsonl and text figures, anchors in turn, copied rows, "
          "drift, coverage, files as a commit held them)")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[0]
    docs = argv[1:] or ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    problems = [p for d in docs for p in check_doc(root, d)]
    for p in problems:
        print("check_figures: " + p)
    print("check_figures: %s (%s)" % ("%d mismatches" % len(problems) if problems else "ok",
                                      ", ".join(docs)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

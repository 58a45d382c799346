# goals: issue 37's goal table (goals 1-8, PASS/MISS) from bench/results/, running nothing.
#
# Judges issue 37's goals 1-8 from the results stored in bench/results/ (bench/goals.py
# --issue37, bench/goal_table.py says which file feeds which goal and by which rule) and
# writes the table to docs/performance/goals.md, and to OUT/goals-issue37.md. It runs no
# benchmark: run the suites that measure first (ci/bench all, auto, stack, frameworks, ...
# with --docs: each then regenerates the table too). A goal whose file is absent is a
# NOT MEASURED row with the reason. Seconds; no build.
#
#   ci/bench goals
bench_no_args "$@"
bench_goal_table
cp docs/performance/goals.md "$out/goals-issue37.md"
bench_say "docs/performance/goals.md (and $out/goals-issue37.md): $(grep -o '^[0-9]* PASS.*' docs/performance/goals.md)"

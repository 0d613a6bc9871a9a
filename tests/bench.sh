#!/usr/bin/env bash
# make bench: see tests/bench.py. BENCH_AGENT=1 adds the agent's own cost over a
# 10-minute run (tests/bench_agent.py; make bench-agent runs only that).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 tests/bench.py cpu cuda python
if [ "${BENCH_AGENT:-0}" = 1 ]; then
	python3 tests/bench_agent.py
fi

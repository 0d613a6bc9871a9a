#!/usr/bin/env bash
# make bench: see tests/bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/bench.py cpu cuda python

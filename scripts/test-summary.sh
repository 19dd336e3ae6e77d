#!/usr/bin/env bash
# Counts what the test runners reported: `scripts/test-summary.sh LOG_DIR [SKIP_LOG]` prints
# "PASSED FAILED SKIPPED" from the logs scripts/test.sh saves in LOG_DIR:
#   cargo-*.log   libtest `test result:` lines (ignored = skipped); each line of SKIP_LOG is a
#                 test cargo counted as passed that skipped itself (dta_testkit::skip!).
#   *.log         pytest summary lines (`N passed, N failed, N skipped, N errors in 1.2s`;
#                 errors count as failed, xfailed as skipped, xpassed as passed) and the C unit
#                 binaries' `N checks, N failures` lines, and fuzz/run.sh's
#                 `fuzz: N passed, N failed`, and scripts/faults.sh's
#                 `faults: N passed, N failed, N skipped`.
set -euo pipefail
dir=$1
skip_log=${2:-}

cargo_counts() {
    cat "$dir"/cargo-*.log 2>/dev/null | awk '
        /^test result: / {
            for (i = 1; i <= NF; i++) {
                v = $(i - 1) + 0
                if ($i ~ /^passed;?$/) p += v
                else if ($i ~ /^failed;?$/) f += v
                else if ($i ~ /^ignored;?$/) s += v
            }
        }
        END { print p + 0, f + 0, s + 0 }'
}

# pytest -q ends with one summary line per run, e.g. "3 failed, 40 passed, 2 skipped in 1.5s"
# (possibly wrapped in "=" signs).
pytest_counts() {
    cat "$dir"/*.log 2>/dev/null \
        | grep -E '^[= ]*[0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)(, [0-9]+ [a-z]+)* in [0-9.]+s' \
        | awk '{
            for (i = 2; i <= NF; i++) {
                v = $(i - 1) + 0; w = $i; sub(/,$/, "", w)
                if (w == "passed" || w == "xpassed") p += v
                else if (w == "failed" || w == "error" || w == "errors") f += v
                else if (w == "skipped" || w == "xfailed") s += v
            }
        }
        END { print p + 0, f + 0, s + 0 }'
}

c_counts() {
    cat "$dir"/*.log 2>/dev/null | awk '
        /^[0-9]+ checks, [0-9]+ failures$/ { p += $1 - $3; f += $3 }
        END { print p + 0, f + 0, 0 }'
}

fuzz_counts() {
    cat "$dir"/*.log 2>/dev/null | awk '
        /^fuzz: [0-9]+ passed, [0-9]+ failed$/ { p += $2; f += $4 }
        END { print p + 0, f + 0, 0 }'
}

faults_counts() {
    cat "$dir"/*.log 2>/dev/null | awk '
        /^faults: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { p += $2; f += $4; s += $6 }
        END { print p + 0, f + 0, s + 0 }'
}

read -r cp cf cs < <(cargo_counts)
read -r pp pf ps < <(pytest_counts)
read -r up uf us < <(c_counts)
read -r zp zf zs < <(fuzz_counts)
read -r xp xf xs < <(faults_counts)
self_skipped=0
if [ -n "$skip_log" ] && [ -f "$skip_log" ]; then
    self_skipped=$(grep -c '^dta-test: SKIPPED ' "$skip_log" || true)
fi
echo "$((cp - self_skipped + pp + up + zp + xp)) $((cf + pf + uf + zf + xf)) $((cs + self_skipped + ps + us + zs + xs))"

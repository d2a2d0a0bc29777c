#!/usr/bin/env bash
# Mutation run: how many small plausible bugs in critical code the tests
# catch (see docs/mutation.md for the score and its survivors). Each mutant
# is made in a private copy of the module and judged by its package's own
# tests, one at a time (-p 1). It is slow (a package's test binary is
# rebuilt per mutant) and not part of .ci/run.
#
#   scripts/mutate.sh                          # the critical files, 40 mutants per package
#   scripts/mutate.sh -max 0 audit/verify.go   # every mutant of one file
#   scripts/mutate.sh -max 20 -seed 7 store approval web channel/slack/slackapp channel/teams/teamsapp
#   scripts/mutate.sh -list store/lua/decide.lua
#
# Tests use the embedded miniredis unless REDIS_URL is set (then use a DB
# of your own: every test flushes it).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
critical=(
  store/lua
  approval/decide.go approval/capability.go approval/allowance.go approval/worker.go
  audit/verify.go
  receipt/verify.go receipt/middleware.go receipt/replay.go receipt/signer.go
  action/httpreq/state.go action/httpreq/execute.go
)
flags=() targets=()
while (($#)); do
  case $1 in
    -max|-seed|-timeout|-run|-new|-work|-match) flags+=("$1" "$2"); shift 2 ;;
    -*) flags+=("$1"); shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${critical[@]}")
exec go run ./tools/mutate "${flags[@]}" "${targets[@]}"

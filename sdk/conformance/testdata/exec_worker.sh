#!/bin/sh
# The conformance worker's handler for `jobq work --exec` (docs/workers.md,
# "The conformance worker"): the job's params arrive on stdin, the output
# goes to stdout, log lines to stderr, the exit status is the outcome.
# Needs jq.
set -u
params=$(cat)
action=$(printf '%s' "$params" | jq -r '.action')

canceled() {
  echo canceled >&2
  exit 1
}

case "$action" in
succeed)
  printf '%s' "$params" | jq -c '.output'
  ;;
fail)
  printf '%s' "$params" | jq -r '.error' >&2
  if [ "$(printf '%s' "$params" | jq -r '.retry')" = "false" ]; then
    exit 65 # jobq work's --no-retry-exit default: fail without retry
  fi
  exit 1
  ;;
sleep)
  trap canceled TERM
  ms=$(printf '%s' "$params" | jq -r '.ms')
  sleep "$(printf '%s' "$params" | jq -r '.ms / 1000')" &
  wait $!
  printf '{"slept":%s}\n' "$ms"
  ;;
block)
  trap canceled TERM
  while :; do
    sleep 1 &
    wait $!
  done
  ;;
log)
  printf '%s' "$params" | jq -r '.lines[]' >&2
  if [ "$(printf '%s' "$params" | jq -r 'has("progress")')" = "true" ]; then
    printf '%s' "$params" | jq -r '"jobq:progress \(.progress) \(.message // "")"' >&2
  fi
  printf '%s' "$params" | jq -c '{logged: (.lines | length)}'
  ;;
big_output)
  printf '%s' "$params" | jq -c '{data: ("x" * .bytes)}'
  ;;
*)
  echo "unknown action $action" >&2
  exit 65
  ;;
esac

#!/bin/sh
# A hostile agent for the board's hostile test (tests/e2e/board_hostile.rs), run by the
# command harness inside a real sandbox. Everything it writes is meant to run, or to fetch
# something, once a page shows it as HTML: its output (the transcript), the reviewer's
# words, a file with a hostile name and hostile content (the diff), and what the check
# prints. The item (its prompt) carries the payloads, one a line, as `payload: TEXT`, and
# what to do as `attack: land` (a change the check passes) or `attack: fail` (a change
# the check fails on, printing the payloads).
#
# Each payload is tagged with where it went (agent output, file content, check output…)
# by the test; here, a line's tag is swapped for this script's own (`@@` → the place).
set -u

prompt=$(cat)
role=${STET_ROLE:-implement}
directive() { printf '%s\n' "$prompt" | sed -n "s/^$1: *//p" | head -n 1; }
# The payloads with their `@@` replaced by `$1`, one a line.
payloads() { printf '%s\n' "$prompt" | sed -n "s/^payload: //p" | sed "s/@@/$1/g"; }

case "$role" in
implement)
    # What the agent says: its transcript, as stet log and the board show it.
    echo "the hostile agent at work"
    payloads agent-output
    case "$(directive attack)" in
    land)
        mkdir -p hostile
        # A file name that is HTML (one path component: no slash)…
        name=$(printf 'hostile/<img src=x onerror="window.__pwned=1"> "><svg onload=window.__pwned=2> {{ 7*7 }} \342\200\256gnp.sh')
        payloads file-content >"$name"
        # …and a path whose slash closes a tag: the directory `<script>…<`, the file
        # `script>.md`, shown as `hostile/<script>…</script>.md`.
        dir='hostile/<script>window.__pwned=3;document.title="PWNED"<'
        mkdir -p "$dir"
        payloads diff-content >"$dir/script>.md"
        ;;
    fail)
        # The check prints this file and fails while it is there.
        payloads check-output >check-says.txt
        ;;
    *)
        echo "no attack: the item names none"
        exit 1
        ;;
    esac
    echo "stet-usage: instructions=1"
    # Stay a while (`hold: SECONDS`), so a page following the lane sees these lines.
    hold=$(directive hold)
    case "$hold" in
        "" | *[!0-9]*) ;;
        *) sleep "$hold" ;;
    esac
    ;;
review)
    echo "LAND"
    payloads reviewer
    ;;
*)
    echo "unknown STET_ROLE '$role'"
    exit 2
    ;;
esac

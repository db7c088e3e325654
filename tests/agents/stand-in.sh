#!/bin/sh
# The stand-in agent of the drive tests, run by the command harness inside a real sandbox.
#
# It reads its prompt on stdin (the work item's text is in it) and obeys directives written
# in the item:
#
#   file: NAME              implement writes NAME (the lane's change)
#   implement: late N       implement answers after N seconds
#   implement: until NAME   implement answers once NAME exists in the lane (a test makes it
#                           when it is ready: waiting on an event, not on time); removes it
#   implement: silent       implement never answers (the host's call limit kills it)
#   implement: fail         implement exits 1
#   implement: limited T    implement hits its usage limit, which resets at T (unix seconds):
#                           `stet-retry-at: T` and exit 75, the command harness's protocol
#   review: out-of-shape    review answers neither LAND nor REVISE
#   review: revise-once     review asks for changes once, then lands
#   review: never           review always asks for changes
#   review: late N          review answers after N seconds
#
# Without a review directive it answers LAND when the lane changed anything since the base
# the prompt names, REVISE otherwise. Every call announces itself first on standard error,
# with the receipt id the host gave it ("stand-in: call RECEIPT ROLE"), which the host keeps
# beside the call's log, so a test can check that no call went without a receipt. (Its
# HOME, the harness's profile, is a fresh copy each call: it remembers nothing.)
set -eu

prompt=$(cat)
role=${STET_ROLE:-implement}
echo "stand-in: call ${STET_RECEIPT:-none} $role" >&2

directive() { printf '%s\n' "$prompt" | sed -n "s/^$1: *//p" | head -n 1; }
title=$(printf '%s\n' "$prompt" | sed -n '3p')

case "$role" in
implement)
    case "$(directive implement)" in
    silent) sleep 100000 ;;
    fail) echo "stand-in: told to fail" >&2; exit 1 ;;
    limited\ *)
        echo "stand-in: usage limit reached"
        echo "stet-retry-at: $(directive implement | cut -d' ' -f2)"
        exit 75
        ;;
    late\ *) sleep "$(directive implement | cut -d' ' -f2)" ;;
    until\ *)
        gate=$(directive implement | cut -d' ' -f2)
        echo "stand-in: waiting for $gate"
        while [ ! -e "$gate" ]; do sleep 0.05; done
        rm -f "$gate"
        ;;
    esac
    file=$(directive file)
    [ -n "$file" ] || { echo "stand-in: no file: directive in the item" >&2; exit 1; }
    echo "$title" >>"$file"
    echo "wrote $file"
    echo "stet-cost-usd: 0.0010"
    echo "stet-usage: turns=1"
    ;;
review)
    verdict=$(directive review)
    case "$verdict" in
    late\ *) sleep "$(echo "$verdict" | cut -d' ' -f2)" ;;
    esac
    case "$verdict" in
    out-of-shape) echo "Looks fine to me."; exit 0 ;;
    never) echo "REVISE"; echo "Not like this."; exit 0 ;;
    revise-once)
        # The first round wrote the title once; after a revision it is there twice.
        file=$(directive file)
        if [ "$(grep -c . "$file" 2>/dev/null || echo 0)" -lt 2 ]; then
            echo "REVISE"
            echo "Say it twice."
            exit 0
        fi
        ;;
    esac
    base=$(printf '%s\n' "$prompt" | sed -n 's/.*git diff \([0-9a-f]*\).*/\1/p' | head -n 1)
    if [ -n "$(git diff "$base" --stat)" ]; then
        echo "LAND"
    else
        echo "REVISE"
        echo "Nothing changed."
    fi
    ;;
esac

#!/bin/sh
# stet's example agent: no model, a tiny instruction language, and stet's command-harness
# protocol (see README.md beside this file). It runs in the lane, the prompt on stdin.
#
#   implement (STET_ROLE=implement, the default): obeys the lines of the prompt that read
#       write PATH: TEXT     create or overwrite PATH with TEXT and a newline
#       append PATH: TEXT    add TEXT and a newline to the end of PATH
#     PATH is relative to the lane; absolute paths, `..` and `.git` are refused.
#     Exit 0 when every instruction was carried out; 1 when one was refused or there was
#     none it understood.
#   review (STET_ROLE=review): LAND when `git diff BASE` shows a change, where BASE is the
#     commit the prompt names as `git diff BASE` (else the working copy's own changes);
#     REVISE and the reason when there is none.
set -u

role=${STET_ROLE:-implement}
prompt=$(cat)

implement() {
    done_count=0
    refused=0
    while IFS= read -r line; do
        # Leading blanks do not matter.
        line=$(printf '%s' "$line" | sed 's/^[[:space:]]*//')
        case "$line" in
            "write "*:*) verb=write; rest=${line#write } ;;
            "append "*:*) verb=append; rest=${line#append } ;;
            *) continue ;;
        esac
        path=${rest%%:*}
        text=${rest#*:}
        text=${text# }
        case "$path" in
            "" | /* | *..* | .git | .git/* | */.git | */.git/*)
                echo "refused $verb $path: only relative paths inside the working copy, without .. or .git"
                refused=$((refused + 1))
                continue
                ;;
        esac
        dir=$(dirname -- "$path")
        if ! mkdir -p -- "$dir"; then
            echo "could not make the directory $dir"
            refused=$((refused + 1))
            continue
        fi
        if [ "$verb" = write ]; then
            printf '%s\n' "$text" > "$path" && echo "wrote $path"
        else
            printf '%s\n' "$text" >> "$path" && echo "appended to $path"
        fi || { echo "could not $verb $path"; refused=$((refused + 1)); continue; }
        done_count=$((done_count + 1))
    done <<EOF
$prompt
EOF
    echo "stet-usage: instructions=$done_count"
    if [ "$refused" -gt 0 ]; then
        echo "refused $refused instruction(s); carried out $done_count"
        exit 1
    fi
    if [ "$done_count" -eq 0 ]; then
        echo "no instruction I understand in the prompt: write lines such as 'write PATH: TEXT' or 'append PATH: TEXT'"
        exit 1
    fi
}

review() {
    # The last `git diff BASE` the prompt names: stet's review prompt ends with it.
    base=$(printf '%s\n' "$prompt" | sed -n 's/.*`git diff \([^`]*\)`.*/\1/p' | tail -n 1)
    case "$base" in
        -* | *[!0-9A-Za-z._/~^@-]*)
            echo "REVISE"
            echo "the prompt names a base I will not pass to git: $base"
            exit 0
            ;;
    esac
    if [ -n "$base" ]; then
        if ! changes=$(git diff --stat "$base" -- 2>&1); then
            echo "cannot diff against $base: $changes"
            exit 1
        fi
        since="since $base"
    else
        if ! changes=$(git status --porcelain 2>&1); then
            echo "cannot read the working copy's status: $changes"
            exit 1
        fi
        since="in the working copy"
    fi
    if [ -n "$changes" ]; then
        echo "LAND"
        echo "there is a change $since:"
        printf '%s\n' "$changes"
    else
        echo "REVISE"
        echo "there is no change $since: the work item was not done"
    fi
}

case "$role" in
    implement) implement ;;
    review) review ;;
    *)
        echo "unknown STET_ROLE '$role': expected implement or review"
        exit 2
        ;;
esac

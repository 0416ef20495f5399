#!/usr/bin/env bash
# End-to-end test of a container's memory limit with no --max-memory, for
# text (`sluice run --task lm`), as cgroup_memory is for images: a cgroup
# limited to 200 MB and a corpus with a 40 MB line of letters, one
# pre-token piece (about 12 bytes a byte to tokenize: 480 MB). Without a
# budget the tokenizer took it all and the OOM killer ended the run (exit
# 137, no word of why). The default budget is now half the cgroup's limit,
# the image loader's rule (sched/limits.h): the line is a document that
# can never fit, named with both sizes and where the budget came from, and
# under --on-error skip the run goes on with every other line. --max-memory
# still sets the budget. Needs root and a writable cgroup v1 memory
# controller (or cgroup v2 with memory enabled for children); skipped, with
# the reason, elsewhere. The cgroup is removed on exit.
set -uo pipefail
. "$(dirname "$0")/lib.sh" cgroup_memory_text
g=
if [ -w /sys/fs/cgroup/memory/cgroup.procs ]; then
  g=/sys/fs/cgroup/memory/sluice-e2e-text-$$
  mkdir "$g" 2>/dev/null && echo 200M >"$g/memory.limit_in_bytes" 2>/dev/null || g=
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  g=/sys/fs/cgroup/sluice-e2e-text-$$
  mkdir "$g" 2>/dev/null && echo 200M >"$g/memory.max" 2>/dev/null || g=
fi
if [ -z "$g" ]; then
  echo "skip: no writable cgroup memory controller here (not root, or none mounted)"
  exit 77
fi
trap 'rmdir "$g" 2>/dev/null; rm -rf "$T"' EXIT
# A rank file of the 256 bytes and a few merges (cl100k_base's pattern), a
# corpus of prose lines with the 40 MB line as line 201, and a small one.
python3 - "$T" <<'PY' || { echo "FAIL generator"; exit 1; }
import base64, sys
d = sys.argv[1]
with open(d + "/ranks.tiktoken", "w") as f:
    toks = [bytes([b]) for b in range(256)] + [b"th", b"he", b"the", b" t",
                                                b"ab", b"abab", b"cd"]
    for r, t in enumerate(toks):
        f.write(base64.b64encode(t).decode() + " %d\n" % r)
prose = [("the cat and the dog, line %d of the corpus\n" % i).encode()
         for i in range(400)]
with open(d + "/corpus.txt", "wb") as f:
    f.writelines(prose[:200])
    f.write(b"abcd" * (10 << 20) + b"\n")
    f.writelines(prose[200:])
with open(d + "/small.txt", "wb") as f:
    f.writelines(prose)
PY
# Run inside the cgroup: the shell writes its pid, then becomes sluice.
in_cg() { sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$g" "$@"; }
lm=("$S" run --task lm --tokenizer cl100k_base --vocab "$T/ranks.tiktoken"
    --seq-len 16 --batch 4 --no-shuffle)

out=$(in_cg "${lm[@]}" "$T/corpus.txt" --json --on-error skip 2>"$T/skip.err"); rc=$?
echo "skip: rc $rc"; tail -4 "$T/skip.err"
check "skip: exit 0 under a 200 MB limit (was 137, the OOM killer)" [ "$rc" = 0 ]
check "the long line skipped" [ "$(jget errors_skipped <<<"$out")" = 1 ]
check "it is named with both sizes and the budget's source" \
  grep -q "corpus.txt:201: tokenizing it needs 480.0 MB, the memory budget allows 32.0 MB (the default: 1/2 of the cgroup's memory limit of 200 MB" "$T/skip.err"
small=$("${lm[@]}" "$T/small.txt" --json 2>/dev/null)
tokens() { echo $(( $(jget samples) * 17 + $(jget tokens_dropped <<<"$1") )); }
check "every other line batched: the tokens of the corpus without it" \
  [ "$(tokens "$out" <<<"$out")" = "$(tokens "$small" <<<"$small")" ]

in_cg "${lm[@]}" "$T/corpus.txt" >/dev/null 2>"$T/fail.err"; rc=$?
echo "fail: rc $rc"; tail -2 "$T/fail.err"
check "without skip: the run fails (rc 1, not 137)" [ "$rc" = 1 ]
check "naming the line" grep -q "corpus.txt:201: tokenizing it needs" "$T/fail.err"
check "the default budget is said: 100 MB from the cgroup's 200 MB" \
  grep -q "memory budget: 100 MB (the default: 1/2 of the cgroup's memory limit of 200 MB" "$T/fail.err"

in_cg "${lm[@]}" "$T/small.txt" --max-memory 150M >/dev/null 2>"$T/given.err"; rc=$?
check "--max-memory given: no default said (rc $rc)" \
  eval '[ "$rc" = 0 ] && ! grep -q "the default" "$T/given.err"'

"${lm[@]}" "$T/small.txt" >/dev/null 2>"$T/free.err"; rc=$?
check "outside the cgroup (no limit here): no default budget (rc $rc)" \
  eval '[ "$rc" = 0 ] && ! grep -q "memory budget:" "$T/free.err"'
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]

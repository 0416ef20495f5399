#!/usr/bin/env bash
# e2e: s3:// sources (issue 15 items 1 and 6) against a real S3 server this
# script starts on 127.0.0.1 and stops: moto_server (PyPI moto[server], in
# the project venv), with its authentication on (INITIAL_NO_AUTH_ACTION_COUNT:
# after the first 3 requests, which make an IAM user, its access key and its
# policy, every request's SigV4 signature is checked against that key, as S3
# does). Shards are uploaded with boto3; then
#   - s3://BUCKET/PREFIX/ (a listing, ListObjectsV2) and a brace pattern of
#     s3:// URLs give the digest of the same files read locally, for sluice
#     shards and WebDataset tars;
#   - credentials come from AWS_* variables, or from a credentials file and
#     a config file (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE,
#     AWS_PROFILE) with the endpoint in the profile;
#   - a missing bucket is an error naming the URL and S3's error code;
#   - signed ranged reads through libcurl's multi interface (--io-depth 8,
#     read_path "curl multi") and through the blocking path (--io-depth
#     off) give the local digest;
#   - temporary credentials (STS AssumeRole, with a session token) read;
#   - a wrong secret key is refused by the server: an error naming the URL
#     and SignatureDoesNotMatch, within seconds (no retries of a 403); a
#     bad session token: InvalidToken;
#   - a shard deleted while the run reads it: under skip its samples are
#     counted and named (URL, 404), under fail the run stops naming it.
# Skips (77) without libcurl in the build or without moto_server.
set -uo pipefail
. "$(dirname "$0")/lib.sh" remote_s3
if "$S" run s3://b/x.tar --batch 1 2>&1 | grep -q "built without libcurl"; then
  echo "skip: sluice was built without libcurl (SL_CURL=OFF)"; exit 77
fi
ROOT=${SL_ROOT:-$(dirname "$0")/../..}
MOTO=$ROOT/.venv/bin/moto_server PY=$ROOT/.venv/bin/python
[ -x "$MOTO" ] || { echo "skip: no moto_server in $ROOT/.venv (scripts/install-deps --python)"; exit 77; }
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT

"$S" make-dataset --synthetic "$T/ds" --images 32 --classes 4 >/dev/null 2>&1 ||
  { echo "FAIL make-dataset"; exit 1; }
"$S" pack "$T/ds" "$T/sls" --shard-size 600K >/dev/null 2>&1
"$S" pack "$T/ds" "$T/wds" --format webdataset --shard-size 600K >/dev/null 2>&1

for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  # Through the venv's python: the script's #! may name the venv's
  # first home (a symlinked venv).
  INITIAL_NO_AUTH_ACTION_COUNT=3 "$PY" "$MOTO" -H 127.0.0.1 -p "$port" >"$T/moto.log" 2>&1 &
  pid=$!
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break 2
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  kill $pid 2>/dev/null; pid=
done
[ -n "$pid" ] || { cat "$T/moto.log"; echo "FAIL moto_server did not start"; exit 1; }
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$port
# The 3 unauthenticated requests: a user, its key, a policy allowing all.
keys=$(AWS_ACCESS_KEY_ID=setup AWS_SECRET_ACCESS_KEY=setup "$PY" - <<'PY'
import boto3, json
iam = boto3.client("iam", region_name="us-east-1")
iam.create_user(UserName="sluice")
k = iam.create_access_key(UserName="sluice")["AccessKey"]
iam.put_user_policy(UserName="sluice", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17",
     "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
print(k["AccessKeyId"], k["SecretAccessKey"])
PY
) || { echo "FAIL IAM setup"; exit 1; }
read -r AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY <<<"$keys"
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
"$PY" - "$T" <<'PY' || { echo "FAIL upload"; exit 1; }
import boto3, os, sys
t = sys.argv[1]
s3 = boto3.client("s3")
s3.create_bucket(Bucket="sluice-test")
for d in ("sls", "wds"):
    for f in sorted(os.listdir(os.path.join(t, d))):
        if f.endswith((".sls", ".tar", ".slidx")):  # with the tars' sidecars
            s3.upload_file(os.path.join(t, d, f), "sluice-test", f"{d}/{f}")
PY
ns=$(ls "$T/sls" | grep -c '\.sls$'); nw=$(ls "$T/wds" | grep -c '\.tar$')
run() { "$S" run "$@" --batch 8 --size 32 --seed 2 --epochs 2 --digest --json --quiet 2>&1; }
want=$(run "$T/sls" | jget digest)
check "listing: sls digest = local ($want)" test -n "$want" -a "$(run s3://sluice-test/sls/ | jget digest)" = "$want"
check "brace: sls digest = local" test "$(run "s3://sluice-test/sls/shard-{00000..$(printf '%05d' $((ns - 1)))}.sls" | jget digest)" = "$want"
for d in off 8; do
  out=$(run s3://sluice-test/sls/ --io-depth $d)
  path=$(jget read_path <<<"$out")
  check "sls --io-depth $d ($path): digest = local" test "$(jget digest <<<"$out")" = "$want"
  [ $d = off ] || check "sls --io-depth $d: signed reads through curl multi" test "$path" = "curl multi"
done
wantw=$(run "$T/wds/shard-{000000..$(printf '%06d' $((nw - 1)))}.tar" | jget digest)
check "listing: tar digest = local ($wantw)" test -n "$wantw" -a "$(run s3://sluice-test/wds/ | jget digest)" = "$wantw"

# Credentials and endpoint from the AWS files of a named profile.
cat >"$T/credentials" <<CRED
[default]
aws_access_key_id = wrong
[h15]
aws_access_key_id = $AWS_ACCESS_KEY_ID
aws_secret_access_key = $AWS_SECRET_ACCESS_KEY
CRED
cat >"$T/config" <<CONF
[profile h15]
region = eu-west-1
endpoint_url = $AWS_ENDPOINT_URL
CONF
got=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION -u AWS_ENDPOINT_URL \
  AWS_SHARED_CREDENTIALS_FILE="$T/credentials" AWS_CONFIG_FILE="$T/config" AWS_PROFILE=h15 \
  "$S" run s3://sluice-test/wds/ --batch 8 --size 32 --seed 2 --epochs 2 --digest --json --quiet 2>&1 | jget digest)
check "profile from ~/.aws files: digest = local" test "$got" = "$wantw"

# AWS files that are pipes: the credentials through process substitution
# (a writer that sends them and closes) are read; a config that is a FIFO
# no one writes reads as empty at once (fopen waited for a writer for
# ever), the endpoint then from the environment.
got=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION -u AWS_ENDPOINT_URL \
  AWS_SHARED_CREDENTIALS_FILE=<(cat "$T/credentials") AWS_CONFIG_FILE="$T/config" AWS_PROFILE=h15 \
  "$S" run s3://sluice-test/wds/ --batch 8 --size 32 --seed 2 --epochs 2 --digest --json --quiet 2>&1 | jget digest)
check "credentials through <(...) (a pipe with a writer): digest = local" test "$got" = "$wantw"
mkfifo "$T/fifo"
t0=$(date +%s)
got=$(AWS_CONFIG_FILE="$T/fifo" AWS_SHARED_CREDENTIALS_FILE="$T/fifo" timeout 60 \
  "$S" run s3://sluice-test/wds/ --batch 8 --size 32 --seed 2 --epochs 2 --digest --json --quiet 2>&1 | jget digest)
check "a FIFO with no writer as AWS config: not waited on ($(( $(date +%s) - t0 )) s), digest = local" \
  test "$got" = "$wantw"
got=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE=/dev/zero \
  timeout 60 "$S" run s3://sluice-test/wds/ --batch 8 --size 32 2>&1)
check "a device as the credentials file: refused, named" \
  grep -q "AWS file /dev/zero: not a regular file or a pipe (character device)" <<<"$got"

# Temporary credentials (STS AssumeRole): key, secret and session token,
# the token signed and checked by the server.
tmp=$("$PY" - <<'PY'
import boto3, json
iam = boto3.client("iam", region_name="us-east-1")
trust = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
arn = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
iam.put_role_policy(RoleName="reader", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17",
     "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
c = boto3.client("sts", region_name="us-east-1").assume_role(
    RoleArn=arn, RoleSessionName="sluice")["Credentials"]
print(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
PY
) || bad "STS AssumeRole"
read -r tk ts tt <<<"$tmp"
got=$(AWS_ACCESS_KEY_ID=$tk AWS_SECRET_ACCESS_KEY=$ts AWS_SESSION_TOKEN=$tt run s3://sluice-test/sls/ | jget digest)
check "session token (STS AssumeRole): digest = local" test "$got" = "$want"
out=$(AWS_ACCESS_KEY_ID=$tk AWS_SECRET_ACCESS_KEY=$ts AWS_SESSION_TOKEN=x$tt run s3://sluice-test/sls/)
check "a bad session token: refused, InvalidToken named" grep -q "s3://sluice-test/sls/.*InvalidToken" <<<"$out"
t0=$SECONDS
out=$(AWS_SECRET_ACCESS_KEY=not-the-key "$S" run s3://sluice-test/sls/ --batch 8 --size 32 2>&1)
check "wrong secret: refused, error names URL and SignatureDoesNotMatch ($(head -c 200 <<<"$out"))" \
  grep -q "s3://sluice-test/sls/.*SignatureDoesNotMatch" <<<"$out"
check "wrong secret: fails within 10 s ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -le 10
for d in off 8; do
  out=$(AWS_SECRET_ACCESS_KEY=not-the-key "$S" run s3://sluice-test/sls/shard-00000.sls --io-depth $d --batch 8 --size 32 2>&1)
  check "wrong secret, one shard, --io-depth $d: SignatureDoesNotMatch named" \
    grep -q "shard-00000.sls.*SignatureDoesNotMatch" <<<"$out"
done
# A shard deleted while an epoch reads it: under skip its samples are
# counted and each named with the URL and S3's 404, the rest delivered; under
# fail the run stops with that error. Every epoch reads every shard again
# (no cache), so the later epochs meet the deletion.
"$PY" - <<'PY' || bad "upload of the deletion set"
import boto3, os
s3 = boto3.client("s3")
for i in range(4):
    s3.copy_object(Bucket="sluice-test", Key=f"del/shard-{i:05d}.sls",
                   CopySource={"Bucket": "sluice-test", "Key": f"sls/shard-{i % 2:05d}.sls"})
PY
del_run() { # del_run ON_ERROR: sluice in the background; shard 2 deleted once it was read
  local seen0 i
  seen0=$(grep -c "GET /sluice-test/del/shard-00002.sls" "$T/moto.log")
  "$S" run s3://sluice-test/del/ --batch 4 --size 32 --epochs 12 --step-ms 20 --prefetch 1 \
    --threads 1 --on-error "$1" --json --quiet >"$T/del-$1.out" 2>&1 &
  local p=$!
  for i in $(seq 100); do
    [ "$(grep -c "GET /sluice-test/del/shard-00002.sls" "$T/moto.log")" -gt "$seen0" ] && break
    sleep 0.1
  done
  "$PY" -c 'import boto3; boto3.client("s3").delete_object(Bucket="sluice-test", Key="del/shard-00002.sls")'
  wait $p; echo $?
}
rc=$(del_run skip)
n_skip=$(jget errors_skipped <"$T/del-skip.out")
check "deleted mid-run, skip: finishes (rc $rc), $n_skip skipped" test "$rc" = 0 -a "${n_skip:-0}" -gt 0
check "deleted mid-run, skip: each skip names the URL and the 404" \
  grep -q "skipped: .*s3://sluice-test/del/shard-00002.sls.*404" "$T/del-skip.out"
check "deleted mid-run, skip: only the deleted shard's samples" \
  bash -c "! grep '^skipped:' '$T/del-skip.out' | grep -v -q shard-00002.sls"
"$PY" -c 'import boto3; s3 = boto3.client("s3"); s3.copy_object(Bucket="sluice-test", Key="del/shard-00002.sls", CopySource={"Bucket": "sluice-test", "Key": "sls/shard-00000.sls"})'
rc=$(del_run fail)
check "deleted mid-run, fail: stops (rc $rc) naming the URL and the 404" \
  bash -c "[ $rc != 0 ] && grep -q 's3://sluice-test/del/shard-00002.sls.*404' '$T/del-fail.out'"

out=$("$S" run s3://no-such-bucket/x/ --batch 8 --size 32 2>&1)
check "missing bucket: error names URL and NoSuchBucket" grep -q "s3://no-such-bucket/x/.*NoSuchBucket" <<<"$out"
echo "remote_s3: $passes passed, $fails failed"
[ "$fails" -eq 0 ]

#!/usr/bin/env bash
# e2e: s3:// sources (issue 15 items 1 and 6) against a real S3 server this
# script starts on 127.0.0.1 and stops: moto_server (PyPI moto[server], in
# the project venv). Shards are uploaded with boto3; then
#   - s3://BUCKET/PREFIX/ (a listing, ListObjectsV2) and a brace pattern of
#     s3:// URLs give the digest of the same files read locally, for sluice
#     shards and WebDataset tars;
#   - credentials come from AWS_* variables, or from a credentials file and
#     a config file (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE,
#     AWS_PROFILE) with the endpoint in the profile;
#   - a missing bucket is an error naming the URL and S3's error code;
#   - signed ranged reads through libcurl's multi interface (--io-depth 8,
#     read_path "curl multi") and through the blocking path (--io-depth
#     off) give the local digest.
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
  "$PY" "$MOTO" -H 127.0.0.1 -p "$port" >"$T/moto.log" 2>&1 &
  pid=$!
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break 2
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  kill $pid 2>/dev/null; pid=
done
[ -n "$pid" ] || { cat "$T/moto.log"; echo "FAIL moto_server did not start"; exit 1; }
export AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
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
aws_access_key_id = filekey
aws_secret_access_key = filesecret
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

out=$("$S" run s3://no-such-bucket/x/ --batch 8 --size 32 2>&1)
check "missing bucket: error names URL and NoSuchBucket" grep -q "s3://no-such-bucket/x/.*NoSuchBucket" <<<"$out"
echo "remote_s3: $passes passed, $fails failed"
[ "$fails" -eq 0 ]

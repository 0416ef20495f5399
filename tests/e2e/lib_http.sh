# What the e2e scripts over HTTP share (remote_http.sh, coalesce_http.sh);
# sourced after lib.sh, not run (tests/CMakeLists.txt leaves lib*.sh out of
# the tests):
#   . "$(dirname "$0")/lib_http.sh"
# skips (77) when sluice was built without libcurl or when nginx or python3
# is missing; sets PY (python3) and pids (servers to stop: a script adds
# its own); on exit stops the servers and removes $T. Then
#   nginx_start LOG_FORMAT   nginx serving $T/www on a free port of
#                            127.0.0.1, a LOG_FORMAT line a request in
#                            $T/access.log; its URL in N
#   faulty_start PORT_FILE ERR_FILE [OPTION...]   tests/e2e/faulty_http.py
#                            serving $T/www (OPTIONs: its own), its stderr
#                            to ERR_FILE; its pid in fpid, its URL in furl
if "$S" run http://127.0.0.1:1/x.tar --batch 1 2>&1 | grep -q "built without libcurl"; then
  echo "skip: sluice was built without libcurl (SL_CURL=OFF)"; exit 77
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "skip: nginx not installed (scripts/install-deps)"; exit 77; }
PY=$(command -v python3) || { echo "skip: no python3"; exit 77; }
E2E_DIR=$(dirname "${BASH_SOURCE[0]}")

pids=()
http_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  [ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null
  rm -rf "$T"
}
trap http_cleanup EXIT

nginx_start() {
  chmod -R o+rX "$T" # nginx's workers run as another user...
  # ...who may still not reach $T (a clone under a 0700 mktemp folder, as
  # CI's): as root, the workers run as root too.
  local nginx_user="" try i port
  [ "$(id -u)" = 0 ] && nginx_user="user root;"
  # A free port (retried a few times if one is taken meanwhile).
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    cat >"$T/nginx.conf" <<CONF
$nginx_user worker_processes 1; daemon on; pid $T/nginx.pid; error_log $T/nginx.err;
events { worker_connections 128; }
http { log_format l '$1'; access_log $T/access.log l;
  server { listen 127.0.0.1:$port; root $T/www; } }
CONF
    "$NGINX" -c "$T/nginx.conf" -p "$T" 2>>"$T/nginx.err" &&
      for i in $(seq 50); do [ -s "$T/nginx.pid" ] && break 2; sleep 0.1; done
    port=
  done
  [ -n "$port" ] || { cat "$T/nginx.err"; echo "FAIL nginx did not start"; exit 1; }
  N=http://127.0.0.1:$port
}

faulty_start() {
  local port_file=$1 err_file=$2 i
  shift 2
  rm -f "$port_file"
  "$PY" "$E2E_DIR/faulty_http.py" "$T/www" "$port_file" "$@" 2>"$err_file" &
  fpid=$!
  pids+=("$fpid")
  for i in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
  furl=http://127.0.0.1:$(cat "$port_file")
}

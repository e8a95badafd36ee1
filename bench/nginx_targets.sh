# shellcheck shell=bash
# The probe benchmarks' target server: nginx answering 200 "ok\n" for every /t/<i>, 404 for
# anything else, one worker, everything (pid, logs, temp files) inside DIR. Sourced by
# probe_vs_blackbox.sh and probe_callgrind.sh so both measure against the same server.

# nginx_targets_conf DIR PORT: writes DIR/nginx.conf for 127.0.0.1:PORT.
nginx_targets_conf() {
  local dir=$1 port=$2
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<CONF
user root;
worker_processes 1;
worker_rlimit_nofile 16384;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 100000;
  client_body_temp_path $dir/tmp_body;
  proxy_temp_path $dir/tmp_proxy;
  fastcgi_temp_path $dir/tmp_fcgi;
  uwsgi_temp_path $dir/tmp_uwsgi;
  scgi_temp_path $dir/tmp_scgi;
  server {
    listen 127.0.0.1:$port backlog=4096;
    location /t/ { default_type text/plain; return 200 "ok\n"; }
    location / { return 404; }
  }
}
CONF
}

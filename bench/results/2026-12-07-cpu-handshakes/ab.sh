#!/bin/bash
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/svc_h_bench REDIS_URL=redis://127.0.0.1:6379/12
PY=/work/main/.venv/bin/python
for i in 1 2; do
  for side in before after; do
    dropdb -h 127.0.0.1 -U postgres --if-exists svc_h_bench; createdb -h 127.0.0.1 -U postgres svc_h_bench
    if [ $side = before ]; then dir=/tmp/before_hs; else dir=/work/main; fi
    (cd $dir && $PY bench/handshakes.py --out /tmp/hs/$side-$i.json --burst 200 --rounds 2 --sequential 30 --label "$side: $(git -C $dir rev-parse --short HEAD)$( [ $side = after ] && echo ' + optiml_web/socket_reads.py (uncommitted at the time)')" > /tmp/hs/$side-$i.log 2>&1)
    echo "$side $i rc=$? $(date -u +%T) load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done

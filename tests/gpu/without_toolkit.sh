#!/bin/sh
# without_toolkit.sh PROGRAM [ARGS...]: runs PROGRAM where the loader cannot find the CUDA
# toolkit's libraries, as on a GPU host with only the driver or a host with neither, and exits
# as it does. The dynamic loader is told to ignore its cache (and so ld.so.conf's toolkit entry)
# and is given the directories of every library PROGRAM needs but libcudart. Where libcudart
# shares a directory with another of them (a distribution's packaged toolkit), it cannot be
# hidden so, and the test is skipped.
set -u
bin=$1
shift
command -v readelf >/dev/null 2>&1 && command -v ldd >/dev/null 2>&1 || {
    echo "readelf or ldd missing: skipped"
    exit 77
}
interp=$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -x "$interp" ] || { echo "no program interpreter in $bin"; exit 1; }
dirs=
for lib in $(ldd "$bin" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'); do
    d=$(dirname "$lib")
    case $(basename "$lib") in libcudart.so*) continue ;; esac
    if ls "$d"/libcudart.so* >/dev/null 2>&1; then
        echo "libcudart is in $d beside $(basename "$lib"): it cannot be hidden here; skipped"
        exit 77
    fi
    dirs=$dirs${dirs:+:}$d
done
exec "$interp" --inhibit-cache --library-path "$dirs" "$bin" "$@"

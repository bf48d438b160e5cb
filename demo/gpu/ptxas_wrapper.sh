#!/bin/bash
# A slow ptxas, so a Triton/Inductor compile can be caught in progress (demo/gpu/validate.py).
# TRITON_PTXAS_PATH points here. `--version` answers at once (Triton asks it first); a real
# compile appends "<pid> ptxas" to $HANGSCOPE_DEMO_READY, then waits HANGSCOPE_PTXAS_DELAY
# seconds (default 3600) before exec'ing the real ptxas ($HANGSCOPE_REAL_PTXAS). While it
# waits its command line starts with "ptxas" (exec -a), as a slow real ptxas's would, and it
# has no child process: bash's builtin `read -t` on a FIFO does the waiting.
if [ "$1" = "--hangscope-wait" ]; then
    shift
    fifo="${TMPDIR:-/tmp}/hangscope-ptxas-$$"
    mkfifo "$fifo"
    if [ -n "$HANGSCOPE_DEMO_READY" ]; then echo "$$ ptxas" >> "$HANGSCOPE_DEMO_READY"; fi
    read -r -t "${HANGSCOPE_PTXAS_DELAY:-3600}" _ <> "$fifo"
    rm -f "$fifo"
    exec "$@"
fi
real="${HANGSCOPE_REAL_PTXAS:?HANGSCOPE_REAL_PTXAS is not set}"
for arg in "$@"; do
    if [ "$arg" = "--version" ]; then exec "$real" "$@"; fi
done
exec -a ptxas /bin/bash "$0" --hangscope-wait "$real" "$@"

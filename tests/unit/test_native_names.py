"""Native frames named readably (hangscope/frameworks/native.py).

GIVEN the mangled symbols py-spy gives for Rust (v0 and legacy) and C++ frames THEN their
paths, the crate hash and back-references dropped; a C symbol as given. GIVEN a stack that
waits in a library under a Python call THEN that library and its outermost function there,
never libc's or the interpreter's frames.
"""

from __future__ import annotations

from hangscope.frameworks.native import fork_pool, native_call, readable
from hangscope.model import Frame


def test_mangled_symbols_read_as_paths() -> None:
    assert readable("_RNvMs3_NtCsjpdOAJTRuNw_10rayon_core5latchNtB5_9LockLatch14wait_and_reset"
                    ) == "rayon_core::latch::LockLatch::wait_and_reset"
    assert readable("_RNvMNtNtNtNtCsgHYyB3hU8Ec_3std3sys4sync7condvar5futexNtB2_7Condvar4wait"
                    ) == "std::sys::sync::condvar::futex::Condvar::wait"
    assert readable("_ZN4core3ptr13drop_in_place17h0123456789abcdefE") == "core::ptr::drop_in_place"
    assert readable("gomp_team_barrier_wait_end") == "gomp_team_barrier_wait_end"


def test_the_library_under_the_python_call_is_named_and_its_pool_known() -> None:
    so = "/venv/lib/python3.11/site-packages/tokenizers/tokenizers.abi3.so"
    frames = (Frame("syscall", "/usr/lib/x86_64-linux-gnu/libc.so.6", None, native=True),
              Frame("_RNvNtCsab_3std4sync4wait", so, None, native=True),
              Frame("_RNvMs3_NtCsjp_10rayon_core5latchNtB5_9LockLatch14wait_and_reset", so, None,
                    native=True),
              Frame("Collate.__call__", "/job/textdata.py", 48),
              Frame("PyObject_Call", "/usr/lib/libpython3.11.so.1.0", None, native=True))
    call = native_call(frames)
    assert call is not None and call.library == "tokenizers.abi3.so", call
    assert call.function == "rayon_core::latch::LockLatch::wait_and_reset", call
    pool = fork_pool(call)
    assert pool is not None and "TOKENIZERS_PARALLELISM=false" in pool.fix, pool
    libc_only = (frames[0], Frame("lock_PyThread_acquire_lock", "/usr/lib/libpython3.11.so.1.0",
                                  None, native=True), frames[3])
    assert native_call(libc_only) is None

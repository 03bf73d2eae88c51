"""The allocator is tuned only where it is glibc's and the user has not tuned it."""

from __future__ import annotations

import os
import subprocess
import sys

from serving._util import memory


def test_only_glibc_and_only_untuned():
    assert memory.wanted({}, "libc.so.6")
    assert not memory.wanted({"MALLOC_MMAP_MAX_": "65536"}, "libc.so.6")  # the user's own setting wins
    assert not memory.wanted({"MALLOC_TRIM_THRESHOLD_": "0"}, "libc.so.6")
    assert not memory.wanted({}, None)  # no C library found


def test_keep_freed_memory_takes_effect_once_in_a_fresh_process():
    code = ("import logging, sys; from serving._util import memory; "
            "print(memory.keep_freed_memory(), memory.keep_freed_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    expected = "True" if sys.platform == "linux" and memory.wanted({}, memory.ctypes.util.find_library("c")) else "False"
    assert out == [expected, expected]
    tuned = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "MALLOC_MMAP_MAX_": "65536"}).stdout.split()
    assert tuned == ["False", "False"]
